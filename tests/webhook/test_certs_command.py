"""`admitter certs`: the files it writes, and the caBundle it installs during rotation."""

import base64
import datetime as dt
import ipaddress
import ssl

from cryptography import x509

from admitter import pki
from admitter.cli import main
from admitter.commands.certs import ca_bundle, webhook_hosts


def test_certs_writes_a_ca_and_a_serving_pair_for_the_service(tmp_path, capsys):
    assert main(["certs", "--out", str(tmp_path), "--service", "hook", "--namespace", "ops"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    assert (tmp_path / "tls.key").stat().st_mode & 0o077 == 0
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "hook", "hook.ops", "hook.ops.svc", "hook.ops.svc.cluster.local", "localhost"
    ]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    # The serving pair loads and chains to the written CA.
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    cert.verify_directly_issued_by(ca)
    assert "tls.crt" in capsys.readouterr().out


def test_hosts_cover_in_cluster_and_local_names():
    assert webhook_hosts("admitter-webhook", "admitter-system")[-3:] == [
        "admitter-webhook.admitter-system.svc.cluster.local", "localhost", "127.0.0.1"
    ]


def bundle_certs(bundle: str) -> list[str]:
    certs = x509.load_pem_x509_certificates(base64.b64decode(bundle))
    return [c.subject.rfc4514_string() for c in certs]


NOW = dt.datetime.now(dt.UTC)


def encoded(*cas: pki.CertKey) -> str:
    return base64.b64encode(b"".join(ca.cert_pem for ca in cas)).decode()


def test_a_first_bundle_holds_only_the_new_ca():
    new = pki.new_ca("new")
    assert bundle_certs(ca_bundle(new.cert_pem, None, NOW)) == ["CN=new"]
    assert bundle_certs(ca_bundle(new.cert_pem, "", NOW)) == ["CN=new"]


def test_rotation_keeps_trusting_the_previous_ca_until_pods_reload():
    older, previous, new = pki.new_ca("older"), pki.new_ca("previous"), pki.new_ca("new")
    bundle = ca_bundle(new.cert_pem, encoded(previous, older), NOW)
    assert bundle_certs(bundle) == ["CN=new", "CN=previous"]


def test_an_expired_or_identical_previous_ca_is_dropped():
    expired = pki.new_ca("expired", validity=dt.timedelta(minutes=1))
    new = pki.new_ca("new")
    now = dt.datetime.now(dt.UTC)  # not the module's NOW: the suite may run minutes after import
    assert bundle_certs(ca_bundle(new.cert_pem, encoded(expired), now)) == ["CN=new"]
    assert bundle_certs(ca_bundle(new.cert_pem, encoded(new), now)) == ["CN=new"]
