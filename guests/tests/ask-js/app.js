// The SDK tests' JavaScript guest for the client interface: `ask_name` asks the person through
// the client (elicit), `ask_model` asks the client's model (sample) and reports progress. A client
// that cannot is answered with a fallback, as guests/README.md shows (grants: elicit, sample).
// Build: guests/tests/ask-js/build OUT_DIR
import { defineExtension, elicit, progress, sample, unsupportedByClient } from '../../js/src/index.js'; // the SDK in this repository

// The call's answer when the client cannot: what it said is missing.
function orFallback(ask) {
  try {
    return ask();
  } catch (e) {
    const missing = unsupportedByClient(e);
    if (missing === undefined) throw e;
    return `this client cannot answer: ${missing}`;
  }
}

export const { extensionApi } = defineExtension({
  name: 'ask-js',
  version: '0.1.0',
  tools: [{
    name: 'ask_name',
    description: 'Asks the person for their name and greets them.',
    call: () => orFallback(() => {
      const answer = elicit('What is your name?', {
        type: 'object', properties: { name: { type: 'string', description: 'Your name' } }, required: ['name'],
      });
      return answer.action === 'accept' ? `hello, ${answer.content.name}` : `no name: the person chose ${answer.action}`;
    }),
  }, {
    name: 'ask_model',
    description: "Asks the client's model a question.",
    inputSchema: { type: 'object', required: ['question'], properties: { question: { type: 'string' } } },
    call: ({ question }) => orFallback(() => {
      progress(0, 1, 'asking the model');
      const result = sample({ messages: [{ role: 'user', content: { type: 'text', text: question } }], maxTokens: 50 });
      progress(1, 1);
      return `${result.model} said: ${result.content.text}`;
    }),
  }],
});
