// Word counts of a notebook's cells, over the granted `read-cells`: the tool `word_count`, the
// resource `wordcount://current` and the template `wordcount://notebooks/{name}`, the prompt
// `word_budget`, and `replace_word`, an edit of one cell by id that never overwrites someone
// else's change (grant `overwrite-cell` too). As a hook handler it logs how many words of code
// each execution sends to a kernel. The same example as the Rust one, in JavaScript.
import { config, defineExtension, invalidArguments, log } from 'jupyter-mcp-extension';
import { overwriteCell, readCell, readCells } from 'jupyter-mcp:extension/notebook@0.3.0';

const words = (text) => text.split(/\s+/).filter(Boolean).length;

// Counts the markdown and code cells (raw cells are not prose nor code). A refused host call
// throws; the SDK passes the host's message on.
function count(notebook = '') {
  const cells = readCells(notebook).filter((cell) => cell.kind !== 'raw')
    .map((cell) => ({ id: cell.id, index: cell.index, kind: cell.kind, words: words(cell.source) }));
  const sum = (kind) => cells.filter((c) => c.kind === kind).reduce((n, c) => n + c.words, 0);
  const [markdown, code] = [sum('markdown'), sum('code')];
  return { markdown, code, total: markdown + code, cells };
}

// `text` with every whole-word `word` replaced, and how many were. (No `\p{L}` in a regular
// expression: StarlingMonkey's has no Unicode property classes.)
function replaceWhole(text, word, replacement) {
  const isWord = (ch) => ch !== undefined && (/[0-9_]/.test(ch) || ch.toLowerCase() !== ch.toUpperCase());
  let out = '';
  let last = 0;
  let replaced = 0;
  for (let at = text.indexOf(word); at !== -1; at = text.indexOf(word, at + 1)) {
    if (at < last || isWord(text[at - 1]) || isWord(text[at + word.length])) continue;
    out += text.slice(last, at) + replacement;
    last = at + word.length;
    replaced += 1;
  }
  return { source: out + text.slice(last), replaced };
}

const notebookArg = { type: 'string', description: 'The notebook, as named in use_notebook (default: the current one).' };

export const { extensionApi, hooks } = defineExtension({
  // The operator's config may name it otherwise (`config = { name = "..." }`), e.g. to load it twice.
  name: () => String(config().name ?? 'wordcount'),
  version: '0.1.0',
  tools: [{
    name: 'word_count',
    description: "Counts the words of a notebook's markdown and code cells, per cell and in total.",
    inputSchema: { type: 'object', properties: { notebook: notebookArg } },
    readOnly: true,
    call: ({ notebook }) => count(notebook),
  }, {
    name: 'replace_word',
    description: 'Replaces a whole word in one cell, named by its id; refused if the cell changed since you read it.',
    inputSchema: {
      type: 'object',
      required: ['cell_id', 'word', 'replacement'],
      properties: {
        notebook: notebookArg,
        cell_id: { type: 'string', description: 'The id of the cell to edit.' },
        word: { type: 'string', description: 'The word to replace (whole words only).' },
        replacement: { type: 'string', description: 'What replaces it.' },
        expected_source: {
          type: 'string',
          description: 'The cell\'s source as you last read it: if someone changed the cell since, nothing is written and the call says so.',
        },
      },
    },
    call: ({ notebook = '', cell_id: id, word, replacement, expected_source: expected }) => {
      if (!word.trim()) throw invalidArguments("'word' is empty; name the word to replace");
      const cell = readCell(notebook, { tag: 'id', val: id });
      const { source, replaced } = replaceWhole(cell.source, word, replacement);
      if (replaced === 0) return `'${word}' does not occur in cell ${cell.id}`;
      // What the caller saw, else the version just read: either way a change made since by
      // someone else is refused by the host (a conflict), never overwritten.
      overwriteCell(notebook, { tag: 'id', val: cell.id }, source, expected, expected === undefined ? cell.version : undefined);
      return `replaced ${replaced} occurrence(s) of '${word}' in cell ${cell.id}`;
    },
  }],
  resources: [{
    uri: 'wordcount://current',
    name: 'word-count',
    description: 'Word counts of the current notebook (JSON).',
    mimeType: 'application/json',
    read: () => count(),
  }],
  resourceTemplates: [{
    uriTemplate: 'wordcount://notebooks/{name}',
    name: 'notebook-word-count',
    description: 'Word counts of the notebook in use under this name (JSON).',
    mimeType: 'application/json',
    read: (uri, { name }) => count(name),
  }],
  prompts: [{
    name: 'word_budget',
    description: "Asks to bring a notebook's prose within a word budget.",
    arguments: [
      { name: 'budget', description: 'The most words the markdown may have', required: true },
      { name: 'notebook', description: 'The notebook (default: the current one)' },
    ],
    get: ({ budget, notebook }) => {
      if (!/^\s*\d+\s*$/.test(budget)) throw invalidArguments("'budget' must be a whole number of words");
      const counts = count(notebook);
      const limit = Number(budget);
      const verdict = counts.markdown <= limit
        ? 'It is within budget; tighten it only where it is unclear.'
        : `Cut ${counts.markdown - limit} words.`;
      return {
        description: "Bring the notebook's prose within its word budget",
        messages: [{ content: `The notebook's markdown has ${counts.markdown} words (code: ${counts.code}); `
          + `the budget is ${limit}. ${verdict} Keep every code cell as it is.` }],
      };
    },
  }],
  hooks: {
    beforeExecute: ({ code, kernelId }) => {
      log.info(`${words(code)} words of code sent to kernel ${kernelId}`);
    },
  },
});
