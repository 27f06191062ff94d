// Edits made against what the gateway runs (docs/webui.md, *Edits start from what runs*): the note naming the pending
// versions an edit leaves out, the review of what it changes in the running version, and what saving did.
import { Alert, Button, Group, Stack, Text } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { endpoints, type ApplyOut, type ChangeOut, type RunningOut } from '../api/endpoints';
import { afterConfigChange, keys } from '../api/keys';
import { SavedResult } from './ConfigSaveReview';
import { DiffView } from './DiffView';
import { IssueList } from './IssueList';

/** The pending versions (saved, not applied) beside what runs: "version 7" or "versions 7–9"; null when none. */
export function pendingVersions(r: RunningOut | undefined): { runs: number; first: number; last: number; text: string } | null {
  if (!r || r.version_id == null || r.desired_version_id == null || r.desired_version_id <= r.version_id) return null;
  const runs = r.version_id;
  const last = r.desired_version_id;
  const first = runs + 1;
  return { runs, first, last, text: last > first ? `versions ${first}–${last} are` : `version ${last} is` };
}

/** Names the pending versions an edit that starts from what runs leaves out, and what that means. */
export function PendingVersionsNote({ running, title = 'Pending versions are not in this edit', subject = 'A change made here' }: {
  running: RunningOut | undefined;
  title?: string;
  subject?: string;
}) {
  const p = pendingVersions(running);
  if (!p) return null;
  return (
    <Alert color="yellow" mb="md" role="note" title={title}>
      The gateway runs version {p.runs}; {p.text} saved but not applied. {subject} starts from version {p.runs}, what runs: saving makes a new
      version from it and applies that, so the pending changes are not applied with it. They stay in Config history; applying one of them later
      would undo this change unless it is made again.
    </Alert>
  );
}

/** What an edit changes in the version it starts from (the API's preview), with the policy's warnings. */
export function EditReview({ change }: { change: ChangeOut }) {
  const base = change.base_version_id != null ? `version ${change.base_version_id}` : 'the desired config';
  return (
    <Stack gap="xs" aria-label="Changes to review">
      <Text fw={600}>{change.changed ? `Changes to ${base} (what the gateway runs):` : `${base} (what the gateway runs) says this already: nothing to save.`}</Text>
      {change.changed && <DiffView changes={change.changes} />}
      <IssueList issues={change.issues} />
    </Stack>
  );
}

export interface EditOutcome {
  change: ChangeOut;
  /** The apply of the new version; null when the edit changed nothing (no version was made). */
  apply: ApplyOut | null;
}

/** What saving an edit did: the version applied, refused, or nothing changed. */
export function EditOutcomeAlert({ outcome, onClose }: { outcome: EditOutcome | null; onClose?: () => void }) {
  if (!outcome) return null;
  if (!outcome.apply) {
    return (
      <Alert color="gray" mb="md" role="status" withCloseButton={!!onClose} onClose={onClose} closeButtonLabel="Dismiss">
        Nothing changed: version {outcome.change.version_id}, what the gateway runs, already says this, so no version was made.
      </Alert>
    );
  }
  return <SavedResult saved={{ versionId: outcome.change.version_id, apply: outcome.apply }} />;
}

/**
 * One kind of edit made against what the gateway runs: `preview` asks the API what it would change there (nothing is
 * stored), `save` makes the version and applies it. `send(input, preview)` is the API call.
 */
export function useRunningEdit<T>(send: (input: T, preview: boolean) => Promise<ChangeOut>, comment: (input: T) => string) {
  const queryClient = useQueryClient();
  const running = useQuery({ queryKey: keys.running, queryFn: endpoints.running, refetchInterval: 10_000 });
  const [reviewed, setReviewed] = useState<{ key: string; change: ChangeOut } | null>(null);
  const [outcome, setOutcome] = useState<EditOutcome | null>(null);
  const preview = useMutation({
    mutationFn: (input: T) => send(input, true),
    onMutate: () => setOutcome(null),
    onSuccess: (change, input) => setReviewed({ key: JSON.stringify(input), change }),
  });
  const save = useMutation({
    mutationFn: async (input: T): Promise<EditOutcome> => {
      const change = await send(input, false);
      const apply = change.changed ? await endpoints.applyVersion(change.version_id, comment(input)) : null;
      return { change, apply };
    },
    onSuccess: (o) => {
      setOutcome(o);
      setReviewed(null);
    },
    onSettled: () => Promise.all([...afterConfigChange, keys.running].map((k) => queryClient.invalidateQueries({ queryKey: k }))),
  });
  return {
    running: running.data,
    preview,
    save,
    outcome,
    clearOutcome: () => setOutcome(null),
    /** The review of `input`, when it is the one previewed (an edit after the review needs another). */
    reviewOf: (input: T | null): ChangeOut | null => (input !== null && reviewed?.key === JSON.stringify(input) ? reviewed.change : null),
    reset: () => {
      setReviewed(null);
      preview.reset();
      save.reset();
    },
  };
}

/** The review and the button that saves and applies it. */
export function ReviewAndSave({ change, running, onSave, saving, label = 'Save and apply' }: {
  change: ChangeOut;
  running: RunningOut | undefined;
  onSave: () => void;
  saving: boolean;
  label?: string;
}) {
  return (
    <Stack gap="xs">
      <PendingVersionsNote running={running} />
      <EditReview change={change} />
      <Group justify="flex-end">
        <Button onClick={onSave} loading={saving} disabled={!change.changed}>
          {label}
        </Button>
      </Group>
    </Stack>
  );
}
