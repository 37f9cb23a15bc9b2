#!/usr/bin/env node
// The installed `gpu-share` command: runs the compiled CLI (npm install builds it).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const cli = new URL('../dist/electron/cli.js', import.meta.url);
if (!existsSync(fileURLToPath(cli))) {
  process.stderr.write('gpu-share: the CLI is not built yet; run `npm run build` in the gpu-share folder\n');
  process.exit(1);
}
await import(cli.href);
