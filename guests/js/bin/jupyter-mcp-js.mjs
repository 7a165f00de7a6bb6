#!/usr/bin/env node
// The JavaScript guest toolchain in one command, so an author never meets the rough edges of the
// tools underneath:
//   jupyter-mcp-js build app.js -o app.wasm [--world extension] [--wit DIR] [--enable http]
//   jupyter-mcp-js types OUT_DIR [--world extension-with-hooks] [--wit DIR]
// `build` bundles the module with its imports (componentize-js resolves no package names), then
// componentizes it with WASI's http and fetch-event turned off (the host does not offer
// wasi:http unless the operator's policy allows hosts, and `jco componentize` of jco 1.35 fails).
// `types` writes the TypeScript typings of the WIT for a guest (`jco guest-types`, whose CLI finds
// no files with preview2-shim 0.26: the shim no longer opens `/` by default).
import { createRequire } from 'node:module';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const WORLDS = ['extension', 'extension-with-hooks', 'hook-handler'];
const OPTIONAL_FEATURES = ['http', 'fetch-event'];

function usage(message) {
  if (message) console.error(`jupyter-mcp-js: ${message}`);
  console.error('usage: jupyter-mcp-js build SOURCE.js -o OUT.wasm [--world WORLD] [--wit DIR] [--enable http]\n'
    + '       jupyter-mcp-js types OUT_DIR [--world WORLD] [--wit DIR]\n'
    + `WORLD is one of ${WORLDS.join(', ')} (default: extension; types: extension-with-hooks)`);
  process.exit(2);
}

function parse(argv) {
  const [command, ...rest] = argv;
  const opts = { positional: [], enable: [] };
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    const value = () => rest[++i] ?? usage(`${arg} needs a value`);
    if (arg === '-o' || arg === '--out') opts.out = value();
    else if (arg === '-w' || arg === '--world') opts.world = value();
    else if (arg === '--wit') opts.wit = value();
    else if (arg === '--enable') opts.enable.push(value());
    else if (arg.startsWith('-')) usage(`unknown option ${arg}`);
    else opts.positional.push(arg);
  }
  if (opts.world && !WORLDS.includes(opts.world)) usage(`unknown world '${opts.world}'`);
  for (const feature of opts.enable) {
    if (!OPTIONAL_FEATURES.includes(feature)) usage(`--enable takes ${OPTIONAL_FEATURES.join(' or ')}, not '${feature}'`);
  }
  return { command, opts };
}

async function build(opts) {
  const [source] = opts.positional;
  if (!source || !opts.out || opts.positional.length !== 1) usage('build needs one SOURCE.js and -o OUT.wasm');
  const { rolldown } = await import('rolldown');
  const { componentize } = await import('@bytecodealliance/componentize-js');
  const scratch = await mkdtemp(join(tmpdir(), 'jupyter-mcp-js-'));
  try {
    const bundled = join(scratch, 'guest.js');
    const bundle = await rolldown({
      input: resolve(source),
      // Host interfaces are the component's imports, not modules to bundle.
      external: (id) => /^(jupyter-mcp|wasi):/.test(id),
      platform: 'neutral',
      logLevel: 'warn',
    });
    await bundle.write({ file: bundled, format: 'esm', codeSplitting: false });
    await bundle.close();
    const { component } = await componentize({
      sourcePath: bundled,
      witPath: resolve(opts.wit ?? join(here, '..', 'wit')),
      worldName: opts.world ?? 'extension',
      disableFeatures: OPTIONAL_FEATURES.filter((f) => !opts.enable.includes(f)),
    });
    await writeFile(opts.out, component);
    console.error(`jupyter-mcp-js: wrote ${opts.out} (${(component.length / 1e6).toFixed(1)} MB)`);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

async function types(opts) {
  const [outDir] = opts.positional;
  if (!outDir || opts.positional.length !== 1) usage('types needs OUT_DIR');
  const transpile = require.resolve('@bytecodealliance/jco-transpile');
  const shim = createRequire(transpile).resolve('@bytecodealliance/preview2-shim/filesystem');
  (await import(shim))._setPreopens({ '/': '/' });
  const { generateGuestTypes, writeFiles } = await import(transpile);
  const files = await generateGuestTypes(resolve(opts.wit ?? join(here, '..', 'wit')), {
    worldName: opts.world ?? 'extension-with-hooks',
    outDir: resolve(outDir) + '/',
  });
  await writeFiles(files);
  console.error(`jupyter-mcp-js: wrote ${Object.keys(files).length} typings into ${outDir}`);
}

const { command, opts } = parse(process.argv.slice(2));
try {
  if (command === 'build') await build(opts);
  else if (command === 'types') await types(opts);
  else usage(command ? `unknown command '${command}'` : 'no command');
} catch (error) {
  console.error(`jupyter-mcp-js ${command}: ${error?.stack ?? error}`);
  process.exit(1);
}
