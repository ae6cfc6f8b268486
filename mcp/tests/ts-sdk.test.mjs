// `coderun-rpc mcp` driven by the official TypeScript MCP SDK's client (npm
// @modelcontextprotocol/sdk), with server-everything as the upstream.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const here = dirname(fileURLToPath(import.meta.url));
const daemon = process.env.CODERUN_RPC_BIN ?? join(here, "..", "..", "bin", "coderun-rpc");
const everything = join(here, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js");

// connect starts the daemon with its own TMPDIR. One hook ends both, in order: the
// daemon keeps making run directories there until its client closes.
async function connect(t) {
  const dir = mkdtempSync(join(tmpdir(), "mcp-ts-"));
  let client;
  t.after(async () => {
    await client?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const config = join(dir, "mcp.json");
  writeFileSync(config, JSON.stringify({ mcpServers: { everything: { command: "node", args: [everything, "stdio"] } } }));
  const transport = new StdioClientTransport({
    command: daemon,
    args: ["mcp", "--mcp-config", config],
    env: { ...process.env, TMPDIR: dir },
  });
  client = new Client({ name: "ts-sdk-test", version: "1" });
  await client.connect(transport);
  return client;
}

const texts = (result) => result.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");

test("the tool list carries the upstream's stubs", async (t) => {
  const client = await connect(t);
  const { tools } = await client.listTools();
  const run = tools.find((tool) => tool.name === "run_python");
  assert.ok(run, "run_python is listed");
  assert.match(run.description, /class Everything:/);
  assert.match(run.description, /async def get_sum\(self, a: float, b: float\)/);
});

test("a run calls the upstream and reports the run result", async (t) => {
  const client = await connect(t);
  const logs = [];
  const result = await client.callTool(
    { name: "run_python", arguments: { program: 'print("go")\nreturn await everything["get-sum"](a=40, b=2)' } },
    undefined,
    { onprogress: (p) => logs.push(p.message) },
  );
  assert.notEqual(result.isError, true, texts(result));
  assert.equal(result.structuredContent.value, "The sum of 40 and 2 is 42.");
  assert.equal(result.structuredContent.stats.bindingCalls, 1);
  assert.ok(logs.some((m) => m?.includes("go")), `progress ${JSON.stringify(logs)}`);
});

test("a failing program is an error result", async (t) => {
  const client = await connect(t);
  const result = await client.callTool({ name: "run_python", arguments: { program: "raise KeyError('k')" } });
  assert.equal(result.isError, true);
  assert.match(texts(result), /KeyError/);
});

test("a named session keeps state between calls until it is closed (C600, C601)", async (t) => {
  const client = await connect(t);
  const call = (args) => client.callTool({ name: "run_python", arguments: args });
  let result = await call({ session: "ts", program: 'total = await everything["get-sum"](a=1, b=2)\nreturn 1' });
  assert.notEqual(result.isError, true, texts(result));
  assert.match(texts(result), /opened session "ts"/);
  result = await call({ session: "ts", program: "return total" });
  assert.equal(result.structuredContent.value, "The sum of 1 and 2 is 3.", texts(result));
  result = await client.callTool({ name: "close_python_session", arguments: { session: "ts" } });
  assert.notEqual(result.isError, true, texts(result));
  result = await client.callTool({ name: "close_python_session", arguments: { session: "ts" } });
  assert.equal(result.isError, true);
  assert.match(texts(result), /session "ts" is not open/);
});
