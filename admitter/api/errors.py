"""Turn pydantic's validation errors into lines that name the file, the path and the value."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError


def format_location(location: Sequence[str | int]) -> str:
    """`('workloads', 3, 'podRequests', 'cpu')` → `workloads[3].podRequests.cpu`."""
    text = ""
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text or "(top level)"


class InputError(ValueError):
    """Bad input from a file or an object: every problem with its path and its value."""

    def __init__(self, source: str, problems: list[tuple[str, str]]):
        self.source = source
        self.problems = problems
        lines = [f"{source}: {len(problems)} problem(s)"]
        lines += [f"  {path}: {why}" for path, why in problems]
        super().__init__("\n".join(lines))

    @classmethod
    def from_validation(cls, source: str, error: ValidationError) -> InputError:
        problems = []
        for item in error.errors(include_url=False):
            # Union and wrapper validators append a type tag to the location; it is noise.
            location = [p for p in item["loc"] if not (isinstance(p, str) and "[" in p)]
            message = item["msg"].removeprefix("Value error, ")
            if item["type"] == "extra_forbidden":
                message = "unknown key"
            elif item["type"] not in ("value_error", "missing") and "input" in item:
                message += f" (got {item['input']!r})"
            problems.append((format_location(location), message))
        return cls(source, problems)
