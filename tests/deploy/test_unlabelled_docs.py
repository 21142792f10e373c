"""The webhooks docs/webhooks.md tells admins to register for unlabelled work are exactly the
ones the code registers by URL, pointed at the Service."""

import re
from pathlib import Path

import yaml

from admitter.api.settings import Settings
from admitter.webhook.registration import service_client_config, unlabelled_hooks

DOC = Path(__file__).parents[2] / "docs" / "webhooks.md"


def test_the_documented_unlabelled_webhooks_are_the_codes():
    section = DOC.read_text().split("## Unlabelled work (opt-in)")[1].split("\n## ")[0]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)
    settings = Settings.model_validate(yaml.safe_load(blocks[0]))
    documented = yaml.safe_load(blocks[1])
    hooks = unlabelled_hooks(service_client_config, settings.unlabelled_work)
    assert documented == {"mutating": hooks[:2], "validating": hooks[2:]}
