"""A student's session as the server sees it, for the benchmarks: Streamlit's own WebSocket protocol asks for a
link's page and query, and the time runs until the first element a benchmark is waiting for arrives. What a browser
adds runs on the student's own machine, not the server's (bench/bench_browser.py measures that side by side).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def first_element(base: str, path: str, accept: Callable, timeout_s: float) -> tuple[float, object]:
    """(seconds from opening the connection, the element) for the first new element `accept` takes; raises on a
    closed connection or when no message arrives within timeout_s."""
    import websockets
    from streamlit.proto import BackMsg_pb2, ForwardMsg_pb2

    page, _, query = path.lstrip("/").partition("?")
    t0 = time.perf_counter()
    async with websockets.connect(base.replace("http", "ws", 1) + "/_stcore/stream", subprotocols=["streamlit"],
                                  max_size=None) as ws:
        msg = BackMsg_pb2.BackMsg()
        msg.rerun_script.query_string, msg.rerun_script.page_name = query, page
        await ws.send(msg.SerializeToString())
        while True:
            fm = ForwardMsg_pb2.ForwardMsg()
            fm.ParseFromString(await asyncio.wait_for(ws.recv(), timeout_s))
            if fm.WhichOneof("type") == "delta" and fm.delta.WhichOneof("type") == "new_element":
                if accept(fm.delta.new_element):
                    return time.perf_counter() - t0, fm.delta.new_element


def error_text(exc: Exception) -> str:
    """One line for a failed session."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
