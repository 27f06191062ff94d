import { Alert } from '@mantine/core';
import type { ChangeOut } from '../api/endpoints';

/** What a config change did: a new version, or nothing (a save that changed nothing makes no version). */
export function SavedAlert({ saved, onClose }: { saved: ChangeOut | null; onClose: () => void }) {
  if (!saved) return null;
  return (
    <Alert color={saved.changed === false ? 'gray' : 'green'} mb="md" withCloseButton closeButtonLabel="Dismiss" onClose={onClose} role="status">
      {saved.changed === false
        ? `Nothing changed: the desired config (version ${saved.version_id}) already says this, so no version was made.`
        : `Saved as config version ${saved.version_id}. Apply it from Config history (or the drift banner) to make the gateway run it.`}
    </Alert>
  );
}
