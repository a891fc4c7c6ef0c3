// A stock ACP client: the official TypeScript SDK, unchanged, spawning an agent and running
// one complete session over its stdio. Usage: node client.mjs '<json argv>' <cwd>
// Prints one JSON line with what it saw.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [command, ...args] = JSON.parse(process.argv[2]);
const cwd = process.argv[3];
const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"], env: process.env });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const updates = [];
const permissions = [];
const app = acp
  .client({ name: "agentd-ts-test" })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    permissions.push(params.toolCall.toolCallId);
    const allow = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params.update);
  });

const seen = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
  });
  const session = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  const prompt = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "write out.txt" }],
  });
  const live = updates.length;
  await ctx.request(acp.methods.agent.session.load, { sessionId: session.sessionId, cwd, mcpServers: [] });
  const replayed = updates.slice(live);
  const listed = await ctx.request(acp.methods.agent.session.list, {});
  return {
    protocolVersion: init.protocolVersion,
    agent: init.agentInfo?.name,
    sessionId: session.sessionId,
    stopReason: prompt.stopReason,
    listed: listed.sessions.map((s) => s.sessionId),
    replayedUsers: replayed.filter((u) => u.sessionUpdate === "user_message_chunk").map((u) => u.content.text),
    text: updates
      .slice(0, live)
      .filter((u) => u.sessionUpdate === "agent_message_chunk")
      .map((u) => u.content.text)
      .join(""),
  };
});
child.stdin.end();
process.stdout.write(JSON.stringify({ ...seen, permissions }) + "\n");
process.exit(0);
