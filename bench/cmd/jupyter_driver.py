"""The warm Jupyter kernel reference of bench/cmd's workloads group.

Started as `python -c <this> <dir>` by the harness: starts an IPython kernel (ipykernel, through
jupyter_client) whose working directory is <dir>, with its connection file and its channels' IPC
sockets in <dir>, says {"ready": true} on stdout, then executes one cell per request line
{"code": ...} and answers each with one line {"stdout": str, "displays": [[mime, ...], ...],
"error": str | null} once the kernel is idle again and has sent its execute_reply: what a host
driving a notebook kernel waits for. Stdin's end shuts the kernel down. The kernel's own output
never reaches this stdout.
"""
import json
import os
import sys

from jupyter_client.manager import KernelManager

TIMEOUT = 600


def execute(kc, code):
    msg_id = kc.execute(code, store_history=False)
    stdout, displays, error = [], [], None
    while True:
        msg = kc.get_iopub_msg(timeout=TIMEOUT)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream" and content["name"] == "stdout":
            stdout.append(content["text"])
        elif kind in ("display_data", "execute_result"):
            displays.append(sorted(content["data"]))
        elif kind == "error":
            error = "%s: %s" % (content["ename"], content["evalue"])
        elif kind == "status" and content["execution_state"] == "idle":
            break
    while kc.get_shell_msg(timeout=TIMEOUT)["parent_header"].get("msg_id") != msg_id:
        pass
    return {"stdout": "".join(stdout), "displays": displays, "error": error}


def main():
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # a library's stray print must not corrupt the answers
    here = sys.argv[1]
    km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(here, "kernel"),
                       connection_file=os.path.join(here, "kernel.json"))
    km.start_kernel(cwd=here)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=TIMEOUT)
        out.write('{"ready": true}\n')
        out.flush()
        for line in sys.stdin:
            out.write(json.dumps(execute(kc, json.loads(line)["code"])) + "\n")
            out.flush()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


main()
