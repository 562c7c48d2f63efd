import { defineConfig } from 'vite';

/**
 * Builds the dashboard into `dist/` (served by `svc serve` at `/`). Preact's JSX through esbuild,
 * no plugin; every asset is named by its content hash and nothing is loaded from elsewhere.
 */
export const config = defineConfig({
  root: import.meta.dirname,
  base: '/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
  logLevel: 'warn',
});

// Vite reads the default export of its configuration file (the one default export of the repository).
export default config;
