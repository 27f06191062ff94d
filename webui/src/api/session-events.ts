// Session-level signals raised by any API answer, consumed by the auth layer (redirects).
export type SessionSignal = 'unauthenticated' | 'password_change_required';
type Listener = (signal: SessionSignal) => void;

const listeners = new Set<Listener>();

export function onSessionSignal(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export function emitSessionSignal(signal: SessionSignal): void {
  for (const l of listeners) l(signal);
}
