"""coderun.integrations.smolagents end to end: a CodeAgent with a scripted model runs its code
in coderun through CoderunExecutor; the code calls two tools and draws a chart."""

from __future__ import annotations

import signal
import threading
from typing import Any

import pytest

pytest.importorskip("smolagents")

from smolagents import CodeAgent, Tool, tool  # noqa: E402
from smolagents.memory import ActionStep  # noqa: E402
from smolagents.models import ChatMessage, MessageRole, Model  # noqa: E402
from smolagents.monitoring import Timing  # noqa: E402

from coderun.integrations.smolagents import CodeExecutionError, CoderunExecutor  # noqa: E402

from conftest import PNG_MAGIC, code_daemon, daemon_binary  # noqa: E402

pytestmark = pytest.mark.skipif(daemon_binary() is None, reason="daemon not built (make build)")


@tool
def get_temperature(city: str) -> int:
    """The temperature in a city.

    Args:
        city: the city's name
    """
    return {"Paris": 21}.get(city, 0)


@tool
def get_humidity(city: str) -> int:
    """The relative humidity in a city.

    Args:
        city: the city's name
    """
    return {"Oslo": 80}.get(city, 0)


STEP_ONE = """
import matplotlib.pyplot as plt
def both():
    return get_temperature(city="Paris"), get_humidity("Oslo")
paris, oslo = both()
plt.bar(["Paris", "Oslo"], [paris, oslo])
plt.show()
print("plotted")
paris + oslo
"""
STEP_TWO = 'final_answer({"paris": paris, "oslo": oslo})'


class Scripted(Model):
    """Answers with each step's code in turn."""

    def __init__(self, steps: list[str]) -> None:
        super().__init__(model_id="scripted")
        self.steps = steps
        self.seen: list[Any] = []

    def generate(self, messages: Any, stop_sequences: Any = None, response_format: Any = None,
                 tools_to_call_from: Any = None, **kwargs: Any) -> ChatMessage:
        self.seen.append(messages)
        code = self.steps.pop(0)
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"Thought: go\n<code>\n{code}\n</code>")


def test_code_agent_runs_its_code_in_coderun_with_its_tools() -> None:
    executor = CoderunExecutor(daemon=code_daemon(), limits={"maxWallMs": 20000})
    with CodeAgent(tools=[get_temperature, get_humidity], model=Scripted([STEP_ONE, STEP_TWO]),
                   executor=executor, max_steps=3) as agent:
        answer = agent.run("chart it")
        # the second step saw the first one's variables: one session for the agent's steps
        assert answer == {"paris": 21, "oslo": 80}
        first = agent.memory.steps[1]
        assert "plotted" in first.observations and "Last output from code snippet:\n101" in first.observations
    assert executor.code._client is None  # closed with the agent


def test_step_images_and_failures() -> None:
    executor = CoderunExecutor(daemon=code_daemon(), session=False)
    try:
        executor.send_tools({"get_temperature": get_temperature})
        executor.send_variables({"n": 2, "obj": object()})
        out = executor("import matplotlib.pyplot as plt\nplt.plot([1, n]); plt.show()\nget_temperature('Paris')")
        assert out.output == 21 and not out.is_final_answer
        assert [i.mime for i in executor.images] == ["image/png"] and executor.images[0].data.startswith(PNG_MAGIC)
        with pytest.raises(CodeExecutionError, match=r"^ZeroDivisionError: division by zero \(line 2\)$"):
            executor("x = 1\n1 / 0")
        with pytest.raises(CodeExecutionError, match="invalid arguments"):
            executor("get_temperature(city=3)")  # the daemon checks the tool's inputs
    finally:
        executor.cleanup()


def test_keyboard_interrupt_stops_the_step() -> None:
    class Started(Tool):
        name = "started"
        description = "Say the step started."
        inputs: dict[str, Any] = {}
        output_type = "string"

        def forward(self) -> str:
            # Ctrl-C while the host waits for the step, taken by a thread other than the main one
            # (as a terminal's may be): this tool's worker thread
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
            return "ok"

    executor = CoderunExecutor(daemon=code_daemon(), limits={"maxWallMs": 30000})
    try:
        executor.send_tools({"started": Started()})
        with pytest.raises(KeyboardInterrupt):
            executor("started()\nimport time\nwhile True: time.sleep(0.01)")
        # the interrupted step's session is gone with it; the next step opens another
        assert executor("40 + 2").output == 42
    finally:
        executor.cleanup()


def test_step_images_reach_the_model_as_observation_images() -> None:
    """C1163: with the executor's step callback, the images a step displayed are the step's
    ``observations_images`` (PIL images), which smolagents shows the model at its next step;
    a step that displayed none (or whose image cannot be read) attaches none."""
    from PIL import Image as PILImage

    executor = CoderunExecutor(daemon=code_daemon(), limits={"maxWallMs": 20000})
    broken = "class Broken:\n    def _repr_png_(self):\n        return b'\\x89PNG\\r\\n\\x1a\\n broken'\ndisplay(Broken())"
    model = Scripted([STEP_ONE, broken, STEP_TWO])
    with CodeAgent(tools=[get_temperature, get_humidity], model=model, executor=executor,
                   step_callbacks=[executor.step_callback], max_steps=4) as agent:
        agent.run("chart it")
        chart_step, plain_step = agent.memory.steps[1], agent.memory.steps[2]
        assert [im.size for im in chart_step.observations_images or []] == [(640, 480)]
        assert isinstance(chart_step.observations_images[0], PILImage.Image)
        assert not plain_step.observations_images
        # the model's second call carries the chart as an image block
        blocks = [b for m in model.seen[1] for b in (m.content if isinstance(m.content, list) else [])]
        assert any(b.get("type") == "image" and isinstance(b.get("image"), PILImage.Image) for b in blocks)


def _child_pids() -> set[str]:
    """The pids of this process's children (every thread's)."""
    import os
    pids: set[str] = set()
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            pids.update(f.read().split())
    return pids


def test_making_the_agent_starts_no_process() -> None:
    """C1167: the executor and its agent made (tools sent, as CodeAgent does when it runs)
    start no daemon and no thread; the first step starts them."""
    before = _child_pids()
    executor = CoderunExecutor(daemon=code_daemon())
    with CodeAgent(tools=[get_temperature], model=Scripted(["final_answer(1)"]), executor=executor,
                   step_callbacks=[executor.step_callback], max_steps=2) as agent:
        executor.send_tools({**agent.tools})
        assert _child_pids() == before and executor.code._thread is None
        assert agent.run("go") == 1
        assert _child_pids() != before  # the daemon, started by the step


def test_step_images_are_bounded_in_pixels(monkeypatch: pytest.MonkeyPatch) -> None:
    """C1168: the images one step attaches hold at most the step's pixel bound in all (PIL
    decodes each, four bytes a pixel, and an outputs budget holds dozens of compressed canvases
    of the daemon's per-image bound): those past it are left out. The bound is made small here."""
    from coderun.integrations import smolagents as adapter

    monkeypatch.setattr(adapter, "_MAX_STEP_PIXELS", 5000)
    executor = CoderunExecutor(daemon=code_daemon(), session=False)
    try:
        executor.send_tools({})
        executor("""
import zlib, struct
def png(w, h):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = zlib.compress(b"".join(b"\\x00" + bytes(w) for _ in range(h)))
    return (b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", raw) + chunk(b"IEND", b""))
class P:
    def __init__(self, w, h): self.w, self.h = w, h
    def _repr_png_(self): return png(self.w, self.h)
for size in ((50, 50), (60, 60), (40, 40)):
    display(P(*size))
""")
        assert len(executor.images) == 3
        step = ActionStep(step_number=1, timing=Timing(start_time=0.0))
        executor.step_callback(step)
        assert [im.size for im in step.observations_images or []] == [(50, 50), (40, 40)]
    finally:
        executor.cleanup()


def test_step_images_pil_fails_on_are_left_out() -> None:
    """C1236: an image whose header passes the daemon but whose body makes PIL fail with an
    error that is not an OSError (a PNG whose image data runs into a broken chunk header: PIL's
    ``load`` raises SyntaxError) is left out; the step callback does not raise, and the next
    image is attached."""
    executor = CoderunExecutor(daemon=code_daemon(), session=False)
    try:
        executor.send_tools({})
        executor("""
import zlib, struct
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
raw = zlib.compress(bytes(5 * 4))
head = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 0, 0, 0, 0))
class P:
    def __init__(self, body): self.body = body
    def _repr_png_(self): return head + self.body
display(P(chunk(b"IDAT", raw[:len(raw) // 2]) + b"\\x00\\x00\\x00\\x10\\xa1\\x10\\x8d\\x00" + bytes(20)))
display(P(chunk(b"IDAT", raw) + chunk(b"IEND", b"")))
""")
        assert len(executor.images) == 2
        step = ActionStep(step_number=1, timing=Timing(start_time=0.0))
        executor.step_callback(step)
        assert [im.size for im in step.observations_images or []] == [(4, 4)]
    finally:
        executor.cleanup()
