import { Alert, Anchor, Badge, Button, Group, Modal, Stack, Table, Text, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link } from 'react-router-dom';
import { endpoints } from '../api/endpoints';
import { ApiError, errorMessage, type FieldErrors } from '../api/errors';
import { afterConfigChange, keys } from '../api/keys';
import { FINGERPRINT_RE, peerEndpoints, peerKeys, shortFingerprint, type Terminal, type TerminalChange } from '../api/peer';
import { useAuth } from '../auth/useAuth';
import { PageHeader } from '../components/PageHeader';
import { EnrollmentTokens } from '../components/enrollment/EnrollmentTokens';
import { TerminalFields, terminalFieldErrors, words } from '../components/enrollment/TerminalFields';
import { ApplyFailure, Fingerprint } from '../components/PeerIdentity';
import { ScrollTable } from '../components/ScrollTable';
import { Section } from '../components/Section';
import { QueryView } from '../components/StateViews';
import { errorFor } from '../lib/field-errors';
import { formatTime } from '../lib/format';

/** After a change: everything a new config version touches, and the terminals. */
function useRefresh() {
  const queryClient = useQueryClient();
  return () => Promise.all([...afterConfigChange, peerKeys.terminals].map((queryKey) => queryClient.invalidateQueries({ queryKey })));
}

function EnrollForm({ onChanged }: { onChanged: (c: TerminalChange) => void }) {
  const refresh = useRefresh();
  const [name, setName] = useState('');
  const [prefixes, setPrefixes] = useState('');
  const [fingerprint, setFingerprint] = useState('');
  const [errors, setErrors] = useState<FieldErrors>({});
  const enroll = useMutation({
    mutationFn: () => peerEndpoints.enroll({ name: name.trim(), prefixes: words(prefixes), fingerprint: fingerprint.trim(), comment: '' }),
    onSuccess: async (res) => {
      onChanged(res);
      setName('');
      setPrefixes('');
      setFingerprint('');
      setErrors({});
      await refresh();
    },
    onError: (e) => setErrors(e instanceof ApiError ? e.fieldErrors : {}),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const local = terminalFieldErrors(name, prefixes, 'A name for the terminal');
    if (!FINGERPRINT_RE.test(fingerprint.trim())) local.fingerprint = 'sha256: and 64 lowercase hex digits, as the terminal’s dashboard shows it (System settings → Peer path)';
    setErrors(local);
    if (!Object.keys(local).length) enroll.mutate();
  };
  return (
    <form onSubmit={submit} noValidate aria-label="Enroll a terminal">
      <Stack gap="xs">
        <Group align="flex-start" wrap="wrap">
          <TerminalFields
            nameLabel="Name"
            prefixesDescription="The client prefixes of its site, one per line: flows from any other address are refused"
            name={name}
            prefixes={prefixes}
            onName={setName}
            onPrefixes={setPrefixes}
            errors={errors}
          />
        </Group>
        <TextInput
          label="Terminal fingerprint"
          description="From the terminal's own dashboard (System settings → Peer path), copied as it is"
          required
          value={fingerprint}
          onChange={(e) => setFingerprint(e.currentTarget.value)}
          error={errorFor(errors, 'fingerprint')}
          spellCheck={false}
          styles={{ input: { fontFamily: 'monospace', fontSize: 12 } }}
        />
        <Button type="submit" w="fit-content" loading={enroll.isPending}>
          Enroll and apply
        </Button>
        {enroll.error && !Object.keys(errors).length && <Alert color="red" role="alert">{errorMessage(enroll.error)}</Alert>}
      </Stack>
    </form>
  );
}

function Status({ t }: { t: Terminal }) {
  if (!t.applied) return <Badge color="gray">not applied yet</Badge>;
  return t.connected ? <Badge color="green">connected</Badge> : <Badge color="orange">not connected</Badge>;
}

/** The revocation, its consequence named before it applies. */
function RevokeModal({ t, onClose, onChanged }: { t: Terminal; onClose: () => void; onChanged: (c: TerminalChange) => void }) {
  const refresh = useRefresh();
  const revoke = useMutation({
    mutationFn: () => peerEndpoints.revoke(t.name),
    onSuccess: async (res) => {
      onChanged(res);
      onClose();
      await refresh();
    },
  });
  return (
    <Modal opened onClose={onClose} title={`Revoke terminal ${t.name}?`}>
      <Stack>
        <Text size="sm" data-testid="revoke-consequence">
          Its {t.idle_connections} idle connection{t.idle_connections === 1 ? '' : 's'} and {t.live_flows} live flow{t.live_flows === 1 ? '' : 's'} at the hub are closed within 5 s, and its identity
          {t.fingerprints.length === 1 ? '' : 'ies'} {t.fingerprints.map(shortFingerprint).join(' and ')} {t.fingerprints.length === 1 ? 'is' : 'are'} refused from then on: its site's flows take the direct path. A new config
          version is made and applied to every hub gateway; enrolling it again takes its fingerprint.
        </Text>
        {revoke.error && <Alert color="red" role="alert">{errorMessage(revoke.error)}</Alert>}
        <Group justify="flex-end">
          <Button variant="default" onClick={onClose}>
            Cancel
          </Button>
          <Button color="red" onClick={() => revoke.mutate()} loading={revoke.isPending}>
            Revoke {t.name}
          </Button>
        </Group>
      </Stack>
    </Modal>
  );
}

/** Rotation, first step: the terminal's next identity beside its current one. */
function RotateModal({ t, onClose, onChanged }: { t: Terminal; onClose: () => void; onChanged: (c: TerminalChange) => void }) {
  const refresh = useRefresh();
  const [fingerprint, setFingerprint] = useState('');
  const [error, setError] = useState<string | undefined>();
  const add = useMutation({
    mutationFn: () => peerEndpoints.addFingerprint(t.name, fingerprint.trim()),
    onSuccess: async (res) => {
      onChanged(res);
      onClose();
      await refresh();
    },
    onError: (e) => setError(errorMessage(e)),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!FINGERPRINT_RE.test(fingerprint.trim())) return setError('sha256: and 64 lowercase hex digits');
    add.mutate();
  };
  return (
    <Modal opened onClose={onClose} title={`Rotate ${t.name}'s identity`}>
      <form onSubmit={submit} noValidate>
        <Stack>
          <Text size="sm">
            The terminal stages a next identity (its System settings → Peer path → Rotate). Enter its next fingerprint: both are let in until you drop the old one, so
            no flow breaks.
          </Text>
          <TextInput label="Next fingerprint" value={fingerprint} onChange={(e) => setFingerprint(e.currentTarget.value)} error={error} spellCheck={false} styles={{ input: { fontFamily: 'monospace', fontSize: 12 } }} />
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" loading={add.isPending}>
              Add and apply
            </Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}

function TerminalRow({ t, canEdit, onRevoke, onRotate, onChanged }: { t: Terminal; canEdit: boolean; onRevoke: () => void; onRotate: () => void; onChanged: (c: TerminalChange) => void }) {
  const refresh = useRefresh();
  const drop = useMutation({
    mutationFn: (fp: string) => peerEndpoints.dropFingerprint(t.name, fp),
    onSuccess: async (res) => {
      onChanged(res);
      await refresh();
    },
  });
  const dropOld = (fp: string) =>
    window.confirm(`Drop ${shortFingerprint(fp)} from ${t.name}? Its idle connections with that identity close; live flows stay.`) && drop.mutate(fp);
  return (
    <Table.Tr data-terminal={t.name}>
      <Table.Td fw={600}>
        <Anchor component={Link} to={`/terminals/${encodeURIComponent(t.name)}`}>
          {t.name}
        </Anchor>
      </Table.Td>
      <Table.Td>
        <Stack gap={2}>
          {t.fingerprints.map((fp) => (
            <Group key={fp} gap={4} wrap="nowrap">
              <Text size="xs" ff="monospace" title={fp}>
                {shortFingerprint(fp)}
              </Text>
              {canEdit && t.fingerprints.length > 1 && (
                <Button size="compact-xs" variant="subtle" color="red" aria-label={`Drop identity ${shortFingerprint(fp)} of ${t.name}`} onClick={() => dropOld(fp)}>
                  drop
                </Button>
              )}
            </Group>
          ))}
        </Stack>
      </Table.Td>
      <Table.Td>
        <Text size="sm" ff="monospace">
          {t.prefixes.join(', ')}
        </Text>
      </Table.Td>
      <Table.Td style={{ whiteSpace: 'nowrap', minWidth: 130 }}>
        <Status t={t} />
      </Table.Td>
      <Table.Td>
        {t.idle_connections} / {t.live_flows}
      </Table.Td>
      <Table.Td>{t.last_seen ? formatTime(t.last_seen) : 'never'}</Table.Td>
      <Table.Td>
        {t.refused_prefix} / {t.refused_other}
      </Table.Td>
      {canEdit && (
        <Table.Td>
          <Group gap={4} justify="flex-end" wrap="nowrap">
            <Button size="compact-xs" variant="default" onClick={onRotate} disabled={t.fingerprints.length > 1}>
              Rotate…
            </Button>
            <Button size="compact-xs" variant="light" color="red" onClick={onRevoke}>
              Revoke…
            </Button>
          </Group>
          {drop.error && <Text c="red" size="xs">{errorMessage(drop.error)}</Text>}
        </Table.Td>
      )}
    </Table.Tr>
  );
}

export default function TerminalsPage() {
  const { user } = useAuth();
  const canEdit = user != null && user.role !== 'viewer';
  const terminals = useQuery({ queryKey: peerKeys.terminals, queryFn: peerEndpoints.terminals, refetchInterval: 2000 });
  const identity = useQuery({ queryKey: peerKeys.identity, queryFn: peerEndpoints.identity });
  const tls = useQuery({ queryKey: keys.tls, queryFn: endpoints.tls });
  const [revoking, setRevoking] = useState<Terminal | null>(null);
  const [rotating, setRotating] = useState<Terminal | null>(null);
  const [change, setChange] = useState<TerminalChange | null>(null);
  return (
    <>
      <PageHeader
        title="Terminals"
        description="The terminals this hub serves on the peer path, each by its own identity and bound to its site's prefixes. Enrolling, rotating and revoking each make a new config version and apply it to every hub gateway."
      />
      <QueryView query={terminals}>
        {(list) =>
          list.role !== 'hub' ? (
            <Alert color="blue" title="This gateway is a terminal">
              Terminals are enrolled at their hub. This terminal's identity and its hub are in System settings → Peer path.
            </Alert>
          ) : (
            <Stack>
              <ApplyFailure change={change} />
              {list.errors.map((e) => (
                <Alert key={e.gateway} color="orange" role="alert">
                  {e.gateway}: its peer state could not be read ({String(e.error.message ?? e.error.code)})
                </Alert>
              ))}
              <ScrollTable
                minWidth={1000}
                columns={['Terminal', 'Identity', 'Site prefixes', 'Status', 'Idle / live', 'Last seen', 'Refused prefix / other']}
                actions={canEdit}
                striped
                aria-label="Enrolled terminals"
              >
                {list.terminals.map((t) => (
                  <TerminalRow key={t.name} t={t} canEdit={canEdit} onRevoke={() => setRevoking(t)} onRotate={() => setRotating(t)} onChanged={setChange} />
                ))}
              </ScrollTable>
              {list.terminals.length === 0 && <Text c="dimmed">No terminal is enrolled: this hub refuses every terminal.</Text>}
              <Text size="sm" c="dimmed" data-testid="refused-unknown">
                Connections refused from identities nobody enrolled (or revoked): {list.refused_unknown}
              </Text>
              <Section id="enrollment-tokens" title="Enrollment tokens">
                {/* The pin of this hub's HTTPS key, as the terminal checks it when it joins. */}
                <EnrollmentTokens canEdit={canEdit} hubPin={tls.data?.certificate?.spki_pin ?? null} />
              </Section>
              {canEdit && (
                <Section id="enroll" title="Enroll a terminal by its fingerprint">
                  <EnrollForm onChanged={setChange} />
                </Section>
              )}
              <Section id="hub-identity" title="This hub's identities">
                <Text size="sm" mb="xs">
                  Each terminal pins these as its hub (its System settings → Peer path → Hub fingerprints).
                </Text>
                {identity.data?.identities.map((i) => (
                  <Group key={i.gateway} gap="xs" wrap="nowrap">
                    <Text size="sm" w={80}>
                      {i.gateway}
                    </Text>
                    {i.fingerprint ? <Fingerprint value={i.fingerprint} label={`${i.gateway}'s fingerprint`} /> : <Text c="orange">unreadable</Text>}
                  </Group>
                ))}
              </Section>
              {revoking && <RevokeModal t={revoking} onClose={() => setRevoking(null)} onChanged={setChange} />}
              {rotating && <RotateModal t={rotating} onClose={() => setRotating(null)} onChanged={setChange} />}
            </Stack>
          )
        }
      </QueryView>
    </>
  );
}
