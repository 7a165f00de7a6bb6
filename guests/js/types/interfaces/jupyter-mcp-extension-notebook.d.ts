/// <reference path="./jupyter-mcp-extension-types.d.ts" />
declare module 'jupyter-mcp:extension/notebook@0.3.0' {
  /**
   * Runs code in the notebook's kernel, firing the execute hooks and every policy; returns the
   * nbformat outputs as a JSON array.
   */
  export function executeCode(notebook: string, code: string, timeoutSeconds: number | undefined): string;
  /**
   * Reads every cell of the notebook.
   */
  export function readCells(notebook: string): Array<Cell>;
  /**
   * Reads one cell.
   */
  export function readCell(notebook: string, cell: CellRef): Cell;
  /**
   * The notebook's structure version (the `io.jupyter-mcp/notebook_version` of the tools).
   */
  export function notebookVersion(notebook: string): string;
  /**
   * Inserts a cell before `before` (`none` appends); returns the new cell's id.
   */
  export function insertCell(notebook: string, before: CellRef | undefined, kind: CellKind, source: string, expectedNotebookVersion: string | undefined): CellId;
  /**
   * Replaces a cell's source (a code cell's outputs are cleared); returns the cell's new
   * version. With `expected-source`, the edit is refused with `conflict` unless the cell still
   * holds exactly that text; with `expected-version`, unless it is still at that version.
   * Without either, a cell read in the same call must still hold what was read.
   */
  export function overwriteCell(notebook: string, cell: CellRef, source: string, expectedSource: string | undefined, expectedVersion: string | undefined): string;
  /**
   * Moves a cell so that it ends up before `before` (`none`: to the end).
   */
  export function moveCell(notebook: string, cell: CellRef, before: CellRef | undefined, expectedVersion: string | undefined): void;
  /**
   * Deletes a cell.
   */
  export function deleteCell(notebook: string, cell: CellRef, expectedVersion: string | undefined): void;
  export type Cell = import('jupyter-mcp:extension/types@0.3.0').Cell;
  export type CellId = import('jupyter-mcp:extension/types@0.3.0').CellId;
  export type CellRef = import('jupyter-mcp:extension/types@0.3.0').CellRef;
  export type CellKind = import('jupyter-mcp:extension/types@0.3.0').CellKind;
  export type HostError = import('jupyter-mcp:extension/types@0.3.0').HostError;
}
