// Word count, in JavaScript: a tool, a resource, a resource template and a prompt over the
// granted host function `read-cells`. Build: jupyter-mcp-js build app.js -o wordcount.wasm
import { defineExtension } from 'jupyter-mcp-extension';
import { readCells } from 'jupyter-mcp:extension/notebook@0.2.0';

const words = (source) => source.split(/\s+/).filter(Boolean).length;

function count(notebook = '', cellId) {
  let cells = readCells(notebook); // a refused call throws; the SDK passes its message on
  if (cellId !== undefined) {
    cells = cells.filter((cell) => cell.id === cellId);
    // A thrown Error reaches the caller as a clean error, not a trap.
    if (cells.length === 0) throw new Error(`no cell has the id '${cellId}'; read_notebook lists them`);
  }
  const perCell = cells.map((cell) => ({ id: cell.id, kind: cell.kind, words: words(cell.source) }));
  return { cells: perCell.length, words: perCell.reduce((sum, c) => sum + c.words, 0), per_cell: perCell };
}

export const { extensionApi } = defineExtension({
  name: 'wordcount-js',
  version: '0.1.0',
  tools: [{
    name: 'word_count_js',
    description: "Counts the words in a notebook's cells (all, or the one with cell_id).",
    inputSchema: {
      type: 'object',
      properties: {
        notebook: { type: 'string', description: 'A notebook in use; the current one if omitted.' },
        cell_id: { type: 'string', description: 'Count only this cell.' },
      },
    },
    readOnly: true,
    call: ({ notebook, cell_id }) => count(notebook, cell_id),
  }],
  resources: [{
    uri: 'wordcount-js://current',
    name: 'wordcount-js-current',
    description: 'Word counts of the current notebook.',
    mimeType: 'application/json',
    read: () => count(),
  }],
  resourceTemplates: [{
    uriTemplate: 'wordcount-js://cell/{id}',
    name: 'wordcount-js-cell',
    description: 'Word count of one cell of the current notebook.',
    mimeType: 'application/json',
    read: (uri, { id }) => count('', id),
  }],
  prompts: [{
    name: 'tighten_prose_js',
    description: 'Asks to shorten the longest markdown cell.',
    arguments: [{ name: 'limit', description: 'Words to aim for.', required: true }],
    get: ({ limit }) => {
      const longest = count().per_cell.filter((c) => c.kind === 'markdown').sort((a, b) => b.words - a.words)[0];
      if (!longest) return 'The notebook has no markdown cell to tighten.';
      return `Rewrite markdown cell ${longest.id} (${longest.words} words) in at most ${limit} words.`;
    },
  }],
});
