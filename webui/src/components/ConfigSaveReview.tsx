import { Alert, Button, Group, Stack, Text, TextInput } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { endpoints, type ApplyOut, type GatewayConfig, type PreviewAgainst, type PreviewOut } from '../api/endpoints';
import { ApiError, errorMessage, type FieldErrors } from '../api/errors';
import { afterConfigChange, keys } from '../api/keys';
import { DiffView } from './DiffView';
import { IssueList, issuesFromDetails } from './IssueList';

export interface Saved {
  versionId: number;
  apply: ApplyOut;
}

/** Why an apply failed, from the gateway's error (its step, when it names one). */
function applyFailure(a: ApplyOut): string {
  const e = (a.error ?? {}) as { message?: string; step?: string };
  return `${e.step ? `step ${e.step}: ` : ''}${e.message ?? 'the gateway refused it'}`;
}

/** The gateways that run the version but could not keep it in their config file for their next start. */
function notKept(a: ApplyOut): string[] {
  return (a.gateways ?? []).filter((g) => g.persisted === false).map((g) => `${g.gateway}${g.persist_error ? ` (${g.persist_error})` : ''}`);
}

/** What a save did: the version applied, or saved and refused by the gateway. */
export function SavedResult({ saved }: { saved: Saved }) {
  const unkept = saved.apply.ok ? notKept(saved.apply) : [];
  if (unkept.length > 0) {
    return (
      <Alert color="yellow" role="alert" title={`Version ${saved.versionId} applied, but not kept for the next start`}>
        The gateway runs it now, but could not write it to its config file: {unkept.join('; ')}. A restart of the gateway
        brings back the config it ran before; fix the file's directory (space, permissions) and apply again.
      </Alert>
    );
  }
  return saved.apply.ok ? (
    <Alert color="green" role="status" title={`Version ${saved.versionId} applied`}>
      The gateway runs it now.
    </Alert>
  ) : (
    <Alert color="red" role="alert" title={`Version ${saved.versionId} was saved but not applied`}>
      {applyFailure(saved.apply)}. The gateway keeps running what it ran before; the version stays in Config history.
    </Alert>
  );
}

/**
 * Review, then save and apply a whole config: the API validates it and diffs it against the desired
 * version; saving stores a new version (audited) and applies it on the gateway, which installs it
 * atomically or keeps what it ran. `errors` are the schema's findings: nothing is sent while there are any.
 */
export function ConfigSaveReview({
  config,
  errors,
  comment: initialComment,
  onServerErrors,
  onApplied,
  onSaved,
  applyLabel = 'Save and apply',
  against = 'desired',
}: {
  config: GatewayConfig;
  errors: FieldErrors;
  comment: string;
  onServerErrors?: (errors: FieldErrors) => void;
  onApplied?: (versionId: number) => void;
  /** The page shows the result itself (this form may be remounted by what the save changes). */
  onSaved?: (saved: Saved) => void;
  applyLabel?: string;
  /** What the review diffs against: the desired version, or what the gateway runs (an edit of the running settings). */
  against?: PreviewAgainst;
}) {
  const queryClient = useQueryClient();
  const [comment, setComment] = useState(initialComment);
  const [reviewed, setReviewed] = useState<{ json: string; preview: PreviewOut } | null>(null);
  const [saved, setSaved] = useState<Saved | null>(null);
  const json = JSON.stringify(config);
  const current = reviewed?.json === json ? reviewed.preview : null;
  const blocked = Object.keys(errors).length > 0;
  const fail = (e: unknown) => onServerErrors?.(e instanceof ApiError ? e.fieldErrors : {});

  const preview = useMutation({
    mutationFn: () => endpoints.previewConfig(config, against),
    onSuccess: (p) => {
      setSaved(null);
      setReviewed({ json, preview: p });
      onServerErrors?.({});
    },
    onError: fail,
  });
  const save = useMutation({
    mutationFn: async (): Promise<Saved> => {
      const stored = await endpoints.putConfig(config, comment);
      const apply = await endpoints.applyVersion(stored.version_id, comment);
      return { versionId: stored.version_id, apply };
    },
    onSuccess: (s) => {
      if (onSaved) onSaved(s);
      else setSaved(s);
      setReviewed(null);
      if (s.apply.ok) onApplied?.(s.versionId);
    },
    onError: fail,
    onSettled: () => Promise.all([...afterConfigChange, keys.interfaces].map((k) => queryClient.invalidateQueries({ queryKey: k }))),
  });
  const failure = preview.error ?? save.error;

  return (
    <Stack gap="sm">
      {blocked && (
        <Alert color="red" role="alert" title="Not a config the gateway accepts">
          {Object.keys(errors).length === 1 ? 'One field needs' : `${Object.keys(errors).length} fields need`} fixing (marked above).
        </Alert>
      )}
      {failure ? (
        <>
          <Alert color="red" role="alert">
            {errorMessage(failure)}
          </Alert>
          {failure instanceof ApiError && <IssueList issues={issuesFromDetails(failure.details)} />}
        </>
      ) : null}
      {current && (
        <Stack gap="xs" aria-label="Changes to review">
          <Text fw={600}>
            {current.changes.length === 0
              ? against === 'running'
                ? 'This is what the gateway runs already.'
                : 'This is the desired config already.'
              : `Changes to ${current.base_version_id != null ? `version ${current.base_version_id}` : 'the desired config'}${against === 'running' ? ' (what the gateway runs)' : ''}:`}
          </Text>
          {current.changes.length > 0 && <DiffView changes={current.changes} />}
          <IssueList issues={current.issues} />
        </Stack>
      )}
      {saved && <SavedResult saved={saved} />}
      <Group justify="flex-end" align="flex-end">
        <TextInput label="Comment" value={comment} onChange={(e) => setComment(e.currentTarget.value)} w={320} maxLength={1000} />
        <Button variant="default" onClick={() => preview.mutate()} loading={preview.isPending} disabled={blocked}>
          Review changes
        </Button>
        <Button onClick={() => save.mutate()} loading={save.isPending} disabled={blocked || !current}>
          {applyLabel}
        </Button>
      </Group>
    </Stack>
  );
}
