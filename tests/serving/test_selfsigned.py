"""The stack's self-signed certificate (serving/selfsigned.py): a real TLS handshake trusts it for
its host, and a certificate already in the folder is left alone."""

import socket
import ssl
import threading

from serving.selfsigned import CERT_NAME, KEY_NAME, ensure_certificate, main


def handshake(folder, server_name: str) -> str:
    """Serve one TLS handshake with the folder's certificate; the client trusts it alone."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(folder / CERT_NAME, folder / KEY_NAME)
    client_context = ssl.create_default_context(cafile=str(folder / CERT_NAME))
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve():
            connection, _ = listener.accept()
            try:
                with server_context.wrap_socket(connection, server_side=True) as tls:
                    tls.recv(1)
            except (ssl.SSLError, OSError):  # the client refused the certificate
                connection.close()

        thread = threading.Thread(target=serve)
        thread.start()
        try:
            with socket.create_connection(("127.0.0.1", port)) as raw:
                with client_context.wrap_socket(raw, server_hostname=server_name) as tls:
                    version = tls.version()
                    tls.sendall(b"x")
        finally:
            thread.join(5)
    return version


def test_the_certificate_is_trusted_for_its_host(tmp_path):
    assert ensure_certificate(tmp_path, "chat.example.com") is True
    assert (tmp_path / KEY_NAME).stat().st_mode & 0o777 == 0o600
    assert handshake(tmp_path, "chat.example.com").startswith("TLS")


def test_an_address_as_host(tmp_path):
    ensure_certificate(tmp_path, "127.0.0.1")
    assert handshake(tmp_path, "127.0.0.1").startswith("TLS")


def test_another_name_is_refused(tmp_path):
    ensure_certificate(tmp_path, "chat.example.com")
    try:
        handshake(tmp_path, "other.example.com")
    except ssl.SSLCertVerificationError as exc:
        assert "other.example.com" in str(exc)
    else:
        raise AssertionError("a certificate for chat.example.com was trusted for other.example.com")


def test_a_certificate_already_there_is_kept(tmp_path, capsys):
    (tmp_path / CERT_NAME).write_text("the operator's\n")
    (tmp_path / KEY_NAME).write_text("the operator's key\n")
    assert main([str(tmp_path), "chat.example.com"]) == 0
    assert (tmp_path / CERT_NAME).read_text() == "the operator's\n"
    assert "left as it is" in capsys.readouterr().out
    assert main([]) == 2
