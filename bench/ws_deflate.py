"""permessage-deflate on live frames: bytes on the wire and the server's CPU, per socket, three ways.

    python bench/ws_deflate.py [--sockets 200] [--frames 100] [--pods 2]

A node's live frames as bench/load.py makes them (``--pods`` new pods a frame, each a started pod's
``podlife.timeline/v2``, joined as dashboard/web/fanout.py joins them) go to ``--sockets`` sockets of a
server made as uvicorn makes it (websockets' sans-I/O protocol; each client offers deflate as a browser
does):

* ``per-socket``: uvicorn's own permessage-deflate (context takeover: each socket compresses each frame
  with a compressor of its own, which remembers the frames before);
* ``shared``: podlife's (podlife_site/websocket_deflate.py: no server context takeover, each frame
  compressed once for all sockets);
* ``off``: no compression (``uvicorn --ws-per-message-deflate=false``, or a client offering none).

Printed for each: bytes a socket receives per frame, and the server's CPU (``time.process_time``) per
frame per socket to frame it (compression included). Every client reads every frame back.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import setup_django


def frames(n: int, pods: int) -> list[str]:
    from dashboard.web.fanout import deltas_frame
    from tests.web.factories import started_pod
    from timelines.lifecycle.derive import derive_pod_timeline
    from timelines.live import encode_pods

    out = []
    for f in range(n):
        texts = [
            encode_pods(
                "bench-load",
                [
                    derive_pod_timeline(
                        started_pod(
                            f"uid-{f}-{p}", f"load-0-{f * pods + p}-t{1764530000000000 + f}", node="node-a"
                        )
                    )
                ],
            )[0][2]
            for p in range(pods)
        ]
        out.append(deltas_frame(f + 1, texts))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sockets", type=int, default=200)
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--pods", type=int, default=2)
    args = parser.parse_args()
    setup_django()
    from websockets.extensions.permessage_deflate import ServerPerMessageDeflateFactory

    from podlife_site import websocket_deflate
    from tests.wspair import connected_pair, uvicorn_deflate

    texts = frames(args.frames, args.pods)
    raw = sum(len(t.encode()) for t in texts) / len(texts)
    print(
        f"{args.frames} frames of {args.pods} pods ({raw:,.0f} bytes of JSON each) to {args.sockets} sockets"
    )
    ways = {
        "per-socket": lambda: uvicorn_deflate(ServerPerMessageDeflateFactory),
        "shared": lambda: uvicorn_deflate(websocket_deflate.SharedDeflateFactory),
        "off": lambda: [],
    }
    for name, extensions in ways.items():
        websocket_deflate._recent.clear()
        pairs = [connected_pair(extensions()) for _ in range(args.sockets)]
        sent, cpu = 0, 0.0
        for text in texts:
            data = text.encode()
            began = time.process_time()
            wire = []
            for server, _ in pairs:
                server.send_text(data)
                wire.append(b"".join(server.data_to_send()))
            cpu += time.process_time() - began
            for (_, client), bytes_ in zip(pairs, wire, strict=True):
                sent += len(bytes_)
                client.receive_data(bytes_)
                (frame,) = client.events_received()
                assert frame.data == data
        per = args.frames * args.sockets
        print(f"  {name:>10}: {sent / per:7,.0f} bytes a frame ({sent / per / raw:.0%} of the JSON),"
              f" server CPU {cpu / per * 1e6:6.1f} µs a frame a socket")  # fmt: skip


if __name__ == "__main__":
    main()
