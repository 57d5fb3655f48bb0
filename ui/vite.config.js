// The dashboard's build: one bundle under assets/ (hashed names, cached a year by tessera serve),
// served at /ui/ (docs/dashboard.md). `npm run build -- --outDir DIR` writes it; CMake's
// tessera_ui target writes build/ui/.
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/ui/',
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    sourcemap: false,
    chunkSizeWarningLimit: 400,
  },
});
