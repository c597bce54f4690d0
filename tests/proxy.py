"""A TCP proxy on loopback that can be told to stop forwarding: a store that stops answering
(mid-run, or for a second) as a network fault makes it, with the server itself untouched.

Each connection it accepts is paired with one to the server; two threads pump bytes each way
while the proxy forwards. Paused, it still accepts connections, but holds what comes: the
client sees a store that takes its requests and never answers (as a hung server or a dropped
route does), until `resume` sends on what was held. Refusing, it resets every connection,
open or new (as a server that restarts does), until `resume`. Failing, it answers every
request at once with ``403 AccessDenied``, an error S3's clients do not retry (as a store
does while its credentials or policies are changed), until `resume`. ``on_request``, if
set, is given what each client sends before it is forwarded (a request's head comes first):
a test acts on the store at the moment a given request reaches it.
"""

from __future__ import annotations

import select
import socket
import struct
import threading


class Proxy:
    """Forwards 127.0.0.1:port to ``target`` (host, port) until `close`."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.forwarding = threading.Event()
        self.forwarding.set()
        self.refusing = False
        self.failing = False
        self.on_request = None
        self.closed = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def pause(self) -> None:
        """Stop forwarding: what arrives is held, nothing is answered."""
        self.forwarding.clear()

    def refuse(self) -> None:
        """Reset every connection, open or new, until `resume`."""
        self.refusing = True
        with self.lock:
            for each in self.sockets:
                _reset(each)
            self.sockets.clear()

    def fail(self) -> None:
        """Answer every new request with 403 until `resume` (open connections are reset, so
        that their next request comes anew)."""
        self.refuse()
        self.refusing, self.failing = False, True

    def resume(self) -> None:
        self.refusing = self.failing = False
        self.forwarding.set()

    def close(self) -> None:
        self.closed.set()
        self.forwarding.set()
        with self.lock:
            for each in [self.listener, *self.sockets]:
                try:
                    each.close()
                except OSError:
                    pass

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                _reset(client)
                continue
            if self.failing:
                threading.Thread(target=_refusal, args=(client,), daemon=True).start()
                continue
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.sockets += [client, server]
            for source, sink, asks in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._pump, args=(source, sink, asks), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, asks: bool) -> None:
        while not self.closed.is_set():
            self.forwarding.wait()
            try:
                ready, _, _ = select.select([source], [], [], 0.1)
                if not ready:
                    continue
                # Read only while forwarding: a paused proxy leaves the bytes unread, so
                # that the client's writes stall as on a route that went dead.
                if not self.forwarding.is_set():
                    continue
                data = source.recv(65536)
                if not data:
                    break
                self.forwarding.wait()
                if asks and self.on_request is not None:
                    self.on_request(data)
                sink.sendall(data)
            except (OSError, ValueError):  # closed or reset by `refuse`
                break
        for each in (source, sink):
            try:
                each.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _reset(connection: socket.socket) -> None:
    """Close with a reset (RST), not an orderly end: the peer's next read or write fails."""
    try:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()
    except OSError:
        pass


REFUSAL = (
    b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
)
REFUSAL_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
    b"<Message>the test's store refuses for a moment</Message></Error>"
)


def _refusal(client: socket.socket) -> None:
    """Read a request's head, answer 403, and read on until the client closes."""
    try:
        client.settimeout(5)
        head = b""
        while b"\r\n\r\n" not in head:
            data = client.recv(65536)
            if not data:
                return
            head += data
        client.sendall(REFUSAL % (len(REFUSAL_BODY), REFUSAL_BODY))
        client.shutdown(socket.SHUT_WR)
        while client.recv(65536):
            pass
    except OSError:
        pass
    finally:
        client.close()
