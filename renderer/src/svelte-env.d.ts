// .svelte modules as tsc sees them from .ts files (the Svelte plugin compiles them for Vite).
declare module '*.svelte' {
  import type { Component } from 'svelte';
  const component: Component<Record<string, unknown>>;
  export default component;
}

// Stylesheets imported for their side effect; Vite bundles them.
declare module '*.css';
