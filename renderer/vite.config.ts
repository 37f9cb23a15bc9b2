import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import { svelte } from '@sveltejs/vite-plugin-svelte';

const rendererRoot = fileURLToPath(new URL('.', import.meta.url));
const repoRoot = fileURLToPath(new URL('..', import.meta.url));

export default defineConfig({
  root: rendererRoot,
  // Relative asset URLs: the same build loads from file:// in Electron and from / over HTTP.
  base: './',
  plugins: [svelte({ configFile: false })],
  build: {
    outDir: `${repoRoot}dist/renderer`,
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: true,
  },
  server: {
    // The renderer imports pure helpers from electron/core.
    fs: { allow: [repoRoot] },
  },
});
