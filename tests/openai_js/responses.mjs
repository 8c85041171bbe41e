// The official npm `openai` package against the Responses API door of a real daphne: one
// scenario per call (argv[2]), its findings printed as one JSON line for
// tests/e2e/test_responses_npm.py to compare with the stored runs.
import OpenAI, { AuthenticationError, BadRequestError, ConflictError, NotFoundError } from "openai";

const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: process.env.TOKEN, maxRetries: 0, timeout: 60000 });

async function refusal(promise) {
  try {
    await promise;
    return null;
  } catch (error) {
    const classes = { AuthenticationError, BadRequestError, ConflictError, NotFoundError };
    const name = Object.keys(classes).find((key) => error instanceof classes[key]) || error.constructor.name;
    return { class: name, status: error.status, code: error.code ?? null, param: error.param ?? null };
  }
}

const scenarios = {
  async plain() {
    const { data, response } = await client.responses.create({ model: "default", input: process.env.INPUT }).withResponse();
    const again = await client.responses.retrieve(data.id);
    return {
      id: data.id,
      status: data.status,
      outputText: data.output_text,
      types: data.output.map((item) => item.type),
      run: response.headers.get("x-agentsite-run"),
      conversation: response.headers.get("x-agentsite-conversation"),
      retrievedSame: JSON.stringify(again) === JSON.stringify(data),
    };
  },
  async stream() {
    const events = [];
    for await (const event of await client.responses.create({ model: "default", input: process.env.INPUT, stream: true })) {
      events.push(event);
    }
    const helper = client.responses.stream({ model: "default", input: process.env.INPUT_2 });
    let helperText = "";
    helper.on("response.output_text.delta", (event) => (helperText += event.delta));
    const final = await helper.finalResponse();
    return {
      types: events.map((event) => event.type),
      sequence: events.map((event) => event.sequence_number),
      text: events.filter((event) => event.type === "response.output_text.delta").map((event) => event.delta).join(""),
      completedId: events.at(-1).response.id,
      helperText,
      helperFinal: final.output_text,
      helperStatus: final.status,
    };
  },
  async chain() {
    const first = await client.responses.create({ model: "default", input: process.env.INPUT });
    const second = await client.responses.create({ model: "default", input: process.env.INPUT_2, previous_response_id: first.id });
    const items = await client.responses.inputItems.list(second.id);
    return { first: first.id, second: second.id, previous: second.previous_response_id, secondText: second.output_text, items: items.data.length };
  },
  async cancel() {
    const started = await client.responses.create({ model: "default", input: process.env.INPUT, background: true });
    const busy = await refusal(client.responses.create({ model: "default", input: "x", previous_response_id: started.id }));
    const cancelled = await client.responses.cancel(started.id);
    const retrieved = await client.responses.retrieve(started.id);
    return { started: started.status, background: started.background, busy, cancelled: cancelled.status, retrieved: retrieved.status, id: started.id };
  },
  async errors() {
    const bad = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: "nope", maxRetries: 0 });
    return {
      auth: await refusal(bad.responses.create({ model: "default", input: "x" })),
      missing: await refusal(client.responses.retrieve("resp_" + "0".repeat(32))),
      previous: await refusal(client.responses.create({ model: "default", input: "x", previous_response_id: "resp_nope" })),
      other: await refusal(client.responses.retrieve(process.env.OTHER_ID)),
    };
  },
};

const result = await scenarios[process.argv[2]]();
console.log(JSON.stringify(result));
