import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'electron/**/*.test.ts', 'renderer/**/*.test.ts'],
    // Integration tests start real processes and measure timing (liveness ages, pacing ratios on
    // one pinned core); files running side by side on a two-core machine would skew each other.
    fileParallelism: false,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
