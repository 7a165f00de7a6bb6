export async function resolve(specifier, context, next) {
  if (specifier.startsWith('jupyter-mcp:extension/')) {
    return { url: new URL('./host-stub.mjs', import.meta.url).href, shortCircuit: true };
  }
  return next(specifier, context);
}
