import { Alert, Badge, Button, Code, CopyButton, Group, Stack, Text, Textarea, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { endpoints } from '../api/endpoints';
import { ApiError, errorMessage, type FieldErrors } from '../api/errors';
import { afterConfigChange, keys } from '../api/keys';
import { FINGERPRINT_RE, peerEndpoints, peerKeys, type IdentityList, type TerminalChange } from '../api/peer';
import { errorFor } from '../lib/field-errors';
import { QueryView } from './StateViews';

/** A fingerprint in full, with a button that copies it (what the other end enrolls or pins). */
export function Fingerprint({ value, label }: { value: string; label: string }) {
  return (
    <Group gap={4} wrap="nowrap">
      <Code style={{ wordBreak: 'break-all' }} data-fingerprint={value}>
        {value}
      </Code>
      <CopyButton value={value}>
        {({ copied, copy }) => (
          <Button variant="subtle" size="compact-xs" aria-label={`Copy ${label}`} onClick={copy}>
            {copied ? 'Copied' : 'Copy'}
          </Button>
        )}
      </CopyButton>
    </Group>
  );
}

/** What a change answered when the gateways did not take it (the version is stored, the old config runs). */
export function ApplyFailure({ change }: { change: TerminalChange | null }) {
  if (!change || change.apply.ok) return null;
  const error = change.apply.error as { message?: string; code?: string } | null;
  return (
    <Alert color="red" role="alert" title={`Version ${change.version_id} stored but not applied`}>
      {error?.message ?? error?.code ?? 'a gateway refused it'}; the gateways keep what they ran (Config history has the details).
    </Alert>
  );
}

function lines(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean);
}

/** A terminal's hub: its address and the identities of its gateways (pinned: any other key is refused). */
function HubForm({ initial, canEdit }: { initial: { hub: string; fingerprints: string[] }; canEdit: boolean }) {
  const queryClient = useQueryClient();
  const [hub, setHub] = useState(initial.hub);
  const [fingerprints, setFingerprints] = useState(initial.fingerprints.join('\n'));
  const [errors, setErrors] = useState<FieldErrors>({});
  const [result, setResult] = useState<TerminalChange | null>(null);
  const save = useMutation({
    mutationFn: () => peerEndpoints.setHub({ hub: hub.trim(), hub_fingerprints: lines(fingerprints), enabled: true, comment: '' }),
    onSuccess: async (res) => {
      setResult(res);
      setErrors({});
      await Promise.all([...afterConfigChange, peerKeys.identity].map((queryKey) => queryClient.invalidateQueries({ queryKey })));
    },
    onError: (e) => setErrors(e instanceof ApiError ? e.fieldErrors : {}),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const bad = lines(fingerprints).find((f) => !FINGERPRINT_RE.test(f));
    if (!lines(fingerprints).length || bad) {
      setErrors({ hub_fingerprints: bad ? `${bad}: not a fingerprint (sha256: and 64 lowercase hex digits)` : 'at least one' });
      return;
    }
    save.mutate();
  };
  return (
    <form onSubmit={submit} noValidate aria-label="Hub">
      <Stack gap="xs">
        <TextInput label="Hub address" description="The hub's address on the satellite side (an IP address)" value={hub} onChange={(e) => setHub(e.currentTarget.value)} error={errorFor(errors, 'hub')} disabled={!canEdit} w={320} />
        <Textarea
          label="Hub fingerprints"
          description="One per line: each hub gateway's identity, as its dashboard shows it (Terminals page). Any other key is refused."
          value={fingerprints}
          onChange={(e) => setFingerprints(e.currentTarget.value)}
          error={errorFor(errors, 'hub_fingerprints')}
          disabled={!canEdit}
          autosize
          minRows={2}
          spellCheck={false}
          styles={{ input: { fontFamily: 'monospace', fontSize: 12 } }}
        />
        {canEdit && (
          <Button type="submit" w="fit-content" loading={save.isPending}>
            Save and apply
          </Button>
        )}
        {save.error && !Object.keys(errors).length && <Alert color="red" role="alert">{errorMessage(save.error)}</Alert>}
        <ApplyFailure change={result} />
      </Stack>
    </form>
  );
}

function PoolState({ data }: { data: IdentityList }) {
  const pool = data.peer?.pool;
  if (data.role !== 'terminal') return null;
  if (!data.peer?.enabled || !pool) return <Text size="sm" c="dimmed">The peer path is off: set the hub below to turn it on.</Text>;
  return (
    <Text size="sm" role="status">
      Peer path to {pool.hub}: {pool.ready > 0 ? <Badge color="green">{pool.ready} connections ready</Badge> : <Badge color="orange">not connected</Badge>}
      {pool.error && ` (${pool.error})`}
    </Text>
  );
}

/** A gateway's answer about its identity that is an error: its message. */
function identityError(error: Record<string, unknown> | null | undefined): string {
  return typeof error?.message === 'string' ? error.message : 'the gateway has no identity';
}

/** This gateway's own identity for the peer path, its rotation, and at a terminal the hub it pins. */
export function PeerIdentityCard({ canEdit }: { canEdit: boolean }) {
  const queryClient = useQueryClient();
  const identity = useQuery({ queryKey: peerKeys.identity, queryFn: peerEndpoints.identity, refetchInterval: 5000 });
  const desired = useQuery({ queryKey: keys.desired, queryFn: endpoints.desiredConfig });
  const hub = desired.data?.config.peer;
  const refresh = (data: IdentityList) => queryClient.setQueryData(peerKeys.identity, data);
  const rotate = useMutation({ mutationFn: peerEndpoints.rotateIdentity, onSuccess: refresh });
  const commit = useMutation({ mutationFn: peerEndpoints.commitIdentity, onSuccess: refresh });
  return (
    <QueryView query={identity}>
      {(data) => {
        const me = data.identities[0];
        return (
          <Stack gap="sm">
            <Text size="sm">
              Each gateway has its own key, made on the box; it never leaves it. {data.role === 'terminal' ? 'Give this fingerprint to the hub operator to enroll this terminal.' : 'Terminals pin this fingerprint as their hub.'}
            </Text>
            {me?.fingerprint ? <Fingerprint value={me.fingerprint} label="this gateway's fingerprint" /> : <Alert color="orange">{identityError(me?.error)}</Alert>}
            {me?.next_fingerprint && (
              <Alert color="blue" title="Next identity staged" role="status">
                <Stack gap={4}>
                  <Fingerprint value={me.next_fingerprint} label="the next fingerprint" />
                  <Text size="sm">{data.role === 'terminal' ? 'Have the hub add it (Terminals → Rotate) before you use it; live flows keep the current one.' : 'Terminals must pin it before you use it.'}</Text>
                  {canEdit && (
                    <Button size="xs" w="fit-content" onClick={() => commit.mutate()} loading={commit.isPending}>
                      Use the next identity
                    </Button>
                  )}
                </Stack>
              </Alert>
            )}
            {canEdit && !me?.next_fingerprint && (
              <Button size="xs" variant="default" w="fit-content" onClick={() => rotate.mutate()} loading={rotate.isPending}>
                Rotate: make a next identity
              </Button>
            )}
            {(rotate.error ?? commit.error) && <Alert color="red" role="alert">{errorMessage(rotate.error ?? commit.error)}</Alert>}
            <PoolState data={data} />
            {data.role === 'terminal' && hub && (
              <HubForm key={`${hub.hub ?? ''}|${(hub.hub_fingerprints ?? []).join()}`} initial={{ hub: hub.hub ?? '', fingerprints: hub.hub_fingerprints ?? [] }} canEdit={canEdit} />
            )}
          </Stack>
        );
      }}
    </QueryView>
  );
}
