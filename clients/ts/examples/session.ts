/**
 * A runnable example of a persistent session: load data in one run, use it in the next, branch
 * the state with fork(), and watch for sessions the daemon ends on its own.
 *
 *   cd clients/ts && npm run build && node dist/examples/session.js
 */
import { CodeRunClient } from '../src/node.js';

const client = await CodeRunClient.start();
client.onSessionClosed((e) => console.log(`session ${e.sessionId} closed by the daemon: ${e.reason} (${e.message})`));
try {
  await using s = await client.openSession({ idleTimeoutMs: 60000 });
  await s.run({ program: 'scores = {"ada": 3, "bob": 5}' });
  const best = await s.run({ program: 'return max(scores, key=scores.get)' });
  console.log('best so far:', best.value, '| session:', best.session);

  await using whatIf = await s.fork(); // a copy of the state, to try something out
  await whatIf.run({ program: 'scores["cy"] = 9' });
  console.log('in the fork:', (await whatIf.run({ program: 'return sorted(scores)' })).value);
  console.log('in the source:', (await s.run({ program: 'return sorted(scores)' })).value);
} finally {
  await client.close();
}
