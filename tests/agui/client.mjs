// @ag-ui/client's HttpAgent (the AG-UI reference client, with its event verifier) against the
// AG-UI door of a real daphne, driven by tests/e2e/test_agui_client.py. Prints one JSON object:
// the event types the agent applied, its messages and its pending interrupts after each step.
//
//   node client.mjs run|approve|connect   (env: AGUI_URL, TOKEN, THREAD, MESSAGE)
import {
  HttpAgent,
  buildResumeArray,
  runHttpRequest,
  transformHttpEventStream,
} from "@ag-ui/client";

const { AGUI_URL, TOKEN, THREAD, MESSAGE } = process.env;

// The reconnect the door offers (POST <agent>/connect/), which HttpAgent leaves to subclasses.
class ConnectingAgent extends HttpAgent {
  connect(input) {
    const request = () => this.fetch(`${this.url}connect/`, this.requestInit(input));
    return transformHttpEventStream(runHttpRequest(request));
  }
}

const agent = new ConnectingAgent({
  url: AGUI_URL,
  headers: { Authorization: `Bearer ${TOKEN}` },
  threadId: THREAD,
});

function recorder() {
  const types = [];
  return {
    types,
    subscriber: {
      onEvent: ({ event }) => {
        types.push(event.type);
      },
    },
  };
}

async function step(how, parameters = {}) {
  const seen = recorder();
  await agent[how](parameters, seen.subscriber);
  return {
    types: seen.types,
    messages: agent.messages,
    pending: agent.pendingInterrupts,
  };
}

const scenario = process.argv[2];
const steps = [];
if (scenario === "connect") {
  steps.push(await step("connectAgent"));
} else {
  agent.messages = [{ id: "client-message-1", role: "user", content: MESSAGE }];
  steps.push(await step("runAgent"));
  if (scenario === "approve") {
    const answers = Object.fromEntries(
      agent.pendingInterrupts.map((i) => [i.id, { status: "resolved", payload: { approved: true } }]),
    );
    steps.push(await step("runAgent", { resume: buildResumeArray(agent.pendingInterrupts, answers) }));
  }
}
console.log(JSON.stringify(steps));
