/// <reference types="vitest/config" />
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// The API runs on 127.0.0.1:8000 in development; PERIGEE_API_URL lets the e2e runner point elsewhere.
const apiTarget = process.env.PERIGEE_API_URL ?? 'http://127.0.0.1:8000';
const proxy = { '/api': { target: apiTarget, changeOrigin: false } };

export default defineConfig({
  plugins: [react()],
  server: { proxy },
  preview: { proxy },
  build: {
    outDir: 'dist',
    manifest: true,
    sourcemap: false,
    chunkSizeWarningLimit: 600,
  },
  test: {
    environment: 'jsdom',
    globals: false,
    setupFiles: ['./src/test/setup.ts'],
    include: ['src/**/*.test.{ts,tsx}', 'scripts/**/*.test.mjs', 'e2e/**/*.test.mjs'],
    css: false,
    // Page tests render whole pages in jsdom: on a loaded 2-core CI machine one took over the 5 s default. A
    // test's timeout means hung, not slow (how fast the dashboard is: the bundle budget, `npm run size`).
    testTimeout: 120000,
  },
});
