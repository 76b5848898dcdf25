"""``python -m devcluster.forward FD PORT``: relay connections accepted on the inherited listening socket
FD (bound on the host) to 127.0.0.1:PORT in the network namespace this process runs in."""

from __future__ import annotations

import asyncio
import socket
import sys


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until either side ends, then close ``writer``."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def _serve(listener: socket.socket, port: int) -> None:
    async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, upstream_writer), pipe(upstream_reader, client_writer))

    server = await asyncio.start_server(relay, sock=listener)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    fd, port = int(argv[0]), int(argv[1])
    asyncio.run(_serve(socket.socket(fileno=fd), port))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
