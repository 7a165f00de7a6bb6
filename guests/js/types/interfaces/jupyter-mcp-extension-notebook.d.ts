/// <reference path="./jupyter-mcp-extension-types.d.ts" />
declare module 'jupyter-mcp:extension/notebook@0.2.0' {
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
   * Inserts a cell before `before` (`none` appends); returns the new cell's id.
   */
  export function insertCell(notebook: string, before: CellRef | undefined, kind: CellKind, source: string): CellId;
  /**
   * Replaces a cell's source (a code cell's outputs are cleared). With `expected-source`, the
   * edit is refused with `conflict` unless the cell still holds exactly that text.
   */
  export function overwriteCell(notebook: string, cell: CellRef, source: string, expectedSource: string | undefined): void;
  /**
   * Moves a cell so that it ends up before `before` (`none`: to the end).
   */
  export function moveCell(notebook: string, cell: CellRef, before: CellRef | undefined): void;
  /**
   * Deletes a cell.
   */
  export function deleteCell(notebook: string, cell: CellRef): void;
  export type Cell = import('jupyter-mcp:extension/types@0.2.0').Cell;
  export type CellId = import('jupyter-mcp:extension/types@0.2.0').CellId;
  export type CellRef = import('jupyter-mcp:extension/types@0.2.0').CellRef;
  export type CellKind = import('jupyter-mcp:extension/types@0.2.0').CellKind;
  export type HostError = import('jupyter-mcp:extension/types@0.2.0').HostError;
}
