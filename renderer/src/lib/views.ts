/** The dashboard's views, in navigation order, with their keyboard shortcuts (Alt+1…5). */
export type ViewId = 'peers' | 'timeline' | 'models' | 'gpu' | 'settings';

export const VIEWS: readonly { id: ViewId; label: string }[] = [
  { id: 'peers', label: 'Peers' },
  { id: 'timeline', label: 'Timeline' },
  { id: 'models', label: 'Models' },
  { id: 'gpu', label: 'GPU' },
  { id: 'settings', label: 'Settings' },
];

/** A view's name in the navigation: the device view is named for what the device is (the host
 *  CPU as a device is "CPU", not "GPU"). */
export function viewLabel(view: { id: ViewId; label: string }, deviceNoun: 'CPU' | 'GPU'): string {
  return view.id === 'gpu' ? deviceNoun : view.label;
}

export const isViewId = (value: string | null): value is ViewId => VIEWS.some((view) => view.id === value);

/** Alt+digit → view; null for any other key. */
export function viewForShortcut(event: Pick<KeyboardEvent, 'altKey' | 'ctrlKey' | 'metaKey' | 'key'>): ViewId | null {
  if (!event.altKey || event.ctrlKey || event.metaKey) return null;
  const index = Number(event.key) - 1;
  return Number.isInteger(index) ? (VIEWS[index]?.id ?? null) : null;
}

/** `#timeline` → 'timeline'; anything else (a token fragment, nothing) → null. */
export function viewFromHash(hash: string): ViewId | null {
  const id = hash.startsWith('#') ? hash.slice(1) : hash;
  return isViewId(id) ? id : null;
}
