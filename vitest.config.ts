import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'electron/**/*.test.ts'],
    // Integration tests start real processes that share real segments; unique keys keep them
    // apart, but two cores are all we have, so files run two at a time.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
