/// <reference types="vitest/config" />
import { defineConfig } from 'vite';

// The console is static files that edtd serves at `/`; the API lives on the
// same origin under /api/v1, so no base URL is configured. EDT_WEB_OUT lets
// the CMake build put the files in the build tree instead of web/dist.
export default defineConfig({
  base: './',
  build: {
    outDir: process.env.EDT_WEB_OUT ?? 'dist',
    emptyOutDir: true,
    chunkSizeWarningLimit: 1024,
  },
  server: {
    // `npm run dev` against a running edtd: EDT_API=http://127.0.0.1:7470 npm run dev
    proxy: process.env.EDT_API
      ? { '/api': { target: process.env.EDT_API, ws: true } }
      : undefined,
  },
  test: {
    environment: 'jsdom',
    include: ['src/**/*.test.ts'],
  },
});
