import { ActionIcon, Alert, Badge, Button, Grid, Group, List, Modal, Paper, Select, Stack, Table, TagsInput, Text, TextInput, Title, Tooltip } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { useCan } from '../auth/roles';
import { endpoints, type BypassIn } from '../api/endpoints';
import { ApiError, errorMessage, type FieldErrors } from '../api/errors';
import { keys } from '../api/keys';
import { PageHeader } from '../components/PageHeader';
import { ScrollTable } from '../components/ScrollTable';
import { QueryView } from '../components/StateViews';
import { errorFor } from '../lib/field-errors';
import { checkField, def } from '../lib/schema-check';
import { choices } from '../lib/system-config';
import { PORT_PROTOCOLS, takesPorts } from '../lib/bypass';
import { EditOutcomeAlert, PendingVersionsNote, ReviewAndSave, useRunningEdit } from '../components/RunningEdit';
import { formatBytes } from '../lib/format';

type Protocol = BypassIn['protocol'];
const EMPTY: BypassIn = { name: '', protocol: 'any', cidrs: [], ports: [], comment: '', confirm: false };
/** The protocols the gateway accepts in a bypass entry, from its schema. */
const PROTOCOLS = choices('BypassProtocol');
const NAME_HELP = def('ObjectName').description ?? '';

interface Risk {
  code: string;
  message: string;
}

/** The risks the API wants confirmed before it stores a rule (409 confirm_required), or none. */
function risksOf(e: unknown): Risk[] {
  if (!(e instanceof ApiError) || e.code !== 'confirm_required') return [];
  const d = e.details as { risks?: Risk[] } | null;
  return d?.risks ?? [];
}

/** A change to the bypass rules, made against what the gateway runs. */
type BypassEdit = { kind: 'add'; rule: BypassIn } | { kind: 'delete'; name: string; force: boolean } | { kind: 'restore' };

function send(e: BypassEdit, preview: boolean) {
  if (e.kind === 'add') return endpoints.createBypass(e.rule, preview);
  if (e.kind === 'delete') return endpoints.deleteBypass(e.name, e.force, preview);
  return endpoints.restoreBuiltins(preview);
}

const commentOf = (e: BypassEdit) =>
  e.kind === 'add' ? e.rule.comment || `add bypass ${e.rule.name}` : e.kind === 'delete' ? `delete bypass ${e.name}` : 'restore built-in bypass rules';

/** Field checks from the gateway's schema (a bypass entry's); rules between fields are the API's to answer. */
function validate(r: BypassIn): FieldErrors {
  const e: FieldErrors = {};
  for (const [key, value] of [['name', r.name], ['cidrs', r.cidrs ?? []], ['ports', r.ports ?? []]] as const) {
    const problem = checkField('BypassRule', key, value);
    if (problem) e[key] = problem;
  }
  return e;
}

export default function BypassPage() {
  const can = useCan();
  const rules = useQuery({ queryKey: keys.bypass, queryFn: endpoints.bypass });
  // What each rule let through untouched (the gateway's nft counters, since it last started).
  const counts = useQuery({ queryKey: keys.bypassCounts, queryFn: endpoints.bypassCounts, refetchInterval: 5000 });
  const countOf = (name: string) => counts.data?.rules.find((r) => r.kind === 'bypass' && r.name === name);
  const [draft, setDraftState] = useState<BypassIn>(EMPTY);
  // The operator confirmed the risks the API named for this draft (any change to it asks again).
  const [confirmed, setConfirmed] = useState(false);
  const setDraft = (d: BypassIn) => {
    setDraftState(d);
    setConfirmed(false);
  };
  const [errors, setErrors] = useState<FieldErrors>({});
  // A removal or the restore of the built-ins, under review in its dialog.
  const [other, setOther] = useState<BypassEdit | null>(null);
  const edit = useRunningEdit(send, commentOf);
  const adding: BypassEdit = { kind: 'add', rule: { ...draft, confirm: confirmed } };
  const addReview = edit.reviewOf(adding);
  const otherReview = edit.reviewOf(other);
  const failure = edit.preview.error ?? edit.save.error;
  const risks = risksOf(edit.preview.error);
  const fieldErrors = (e: unknown) => setErrors(e instanceof ApiError ? e.fieldErrors : {});
  const review = (e: BypassEdit) => edit.preview.mutate(e, { onError: fieldErrors });
  const startOther = (e: BypassEdit) => {
    edit.reset();
    setOther(e);
    review(e);
  };
  const saveIt = (e: BypassEdit) =>
    edit.save.mutate(e, {
      onSuccess: () => {
        if (e.kind === 'add') setDraft(EMPTY);
        setOther(null);
      },
      onError: fieldErrors,
    });

  const submit = (e: FormEvent) => {
    e.preventDefault();
    const local = validate(draft);
    setErrors(local);
    if (Object.keys(local).length === 0) review(adding);
  };
  const portsAllowed = takesPorts(draft.protocol);

  return (
    <>
      <PageHeader
        title="IPsec bypass"
        description="Traffic matching these rules is never intercepted, split, cached or rewritten. The built-in IPsec/IKE rules are locked."
      />
      {!other && <EditOutcomeAlert outcome={edit.outcome} onClose={edit.clearOutcome} />}
      {can('operator') && <PendingVersionsNote running={edit.running} />}
      <QueryView query={rules}>
        {(data) => {
          const missingBuiltins = data.rules.some((r) => r.rule.builtin && !r.enabled);
          return (
            <Stack>
              {missingBuiltins && (
                <Alert color="orange" title="A built-in IPsec rule was removed" role="alert">
                  <Group justify="space-between">
                    <Text size="sm">IPsec traffic may be split or cached. Put the built-in rules back unless this is intended.</Text>
                    <Button size="xs" onClick={() => startOther({ kind: 'restore' })}>
                      Restore built-in rules
                    </Button>
                  </Group>
                </Alert>
              )}
              <ScrollTable minWidth={760} columns={['Name', 'Kind', 'Protocol', 'CIDRs', 'Ports', 'Passed untouched']} actions striped aria-label="Bypass rules">
                {data.rules.map(({ rule, enabled, protected: locked }) => (
                  <Table.Tr key={rule.name} style={{ opacity: enabled ? 1 : 0.6 }}>
                    <Table.Td fw={600}>{rule.name}</Table.Td>
                    <Table.Td>
                      {rule.builtin ? (
                        <Badge color="gray" variant="light" leftSection="🔒">
                          built-in{enabled ? '' : ', removed'}
                        </Badge>
                      ) : (
                        <Badge variant="light">custom</Badge>
                      )}
                    </Table.Td>
                    <Table.Td>{rule.protocol}</Table.Td>
                    <Table.Td className="mono">{(rule.cidrs ?? []).join(', ') || 'any'}</Table.Td>
                    <Table.Td className="mono">{(rule.ports ?? []).join(', ') || 'any'}</Table.Td>
                    <Table.Td style={{ whiteSpace: 'nowrap' }}>
                      {enabled && countOf(rule.name)
                        ? `${formatBytes(countOf(rule.name)?.bytes)} in ${(countOf(rule.name)?.packets ?? 0).toLocaleString()} packets`
                        : '—'}
                    </Table.Td>
                    <Table.Td>
                      {enabled && !locked && can('operator') && (
                        <ActionIcon
                          variant="subtle"
                          color="red"
                          aria-label={`Delete bypass rule ${rule.name}`}
                          onClick={() => startOther({ kind: 'delete', name: rule.name, force: false })}
                        >
                          ✕
                        </ActionIcon>
                      )}
                      {enabled && locked && can('admin') && (
                        <Tooltip label="Locked: removing it splits or caches IPsec traffic">
                          <Button
                            size="compact-xs"
                            variant="subtle"
                            color="red"
                            aria-label={`Force removal of built-in rule ${rule.name}`}
                            onClick={() => startOther({ kind: 'delete', name: rule.name, force: true })}
                          >
                            force remove
                          </Button>
                        </Tooltip>
                      )}
                    </Table.Td>
                  </Table.Tr>
                ))}
              </ScrollTable>
              {(counts.data?.rules ?? []).some((r) => r.kind === 'class') && (
                <Text size="sm" c="dimmed">
                  Bypass classes (Policy):{' '}
                  {(counts.data?.rules ?? [])
                    .filter((r) => r.kind === 'class')
                    .map((r) => `${r.name} ${formatBytes(r.bytes)} in ${r.packets.toLocaleString()} packets`)
                    .join(' · ')}{' '}
                  (counted as they enter from the LAN).
                </Text>
              )}
            </Stack>
          );
        }}
      </QueryView>
      <Modal
        opened={other !== null}
        onClose={() => setOther(null)}
        title={other?.kind === 'delete' ? `Delete bypass rule ${other.name}?` : 'Put the built-in rules back?'}
        size="xl"
      >
        <Stack>
          {other?.kind === 'delete' && other.force && (
            <Alert color="red" title="A built-in rule">
              {other.name} protects IPsec traffic. Removing it lets the gateway split or cache that traffic.
            </Alert>
          )}
          {failure && <Alert color="red" role="alert">{errorMessage(failure)}</Alert>}
          {otherReview && other ? (
            <ReviewAndSave change={otherReview} running={edit.running} onSave={() => saveIt(other)} saving={edit.save.isPending} label={other.kind === 'delete' ? 'Delete and apply' : 'Restore and apply'} />
          ) : (
            !failure && <Text size="sm" c="dimmed">Asking the API what this changes…</Text>
          )}
        </Stack>
      </Modal>
      <Modal opened={risks.length > 0 && other === null} onClose={() => edit.reset()} title="Check this rule before it is added" size="lg">
        <Stack>
          <Text size="sm">Traffic a bypass rule matches is never split, cached or shaped per class. This rule:</Text>
          <List size="sm" aria-label="Risks of this rule">
            {risks.map((r) => (
              <List.Item key={r.code + r.message}>{r.message}</List.Item>
            ))}
          </List>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => edit.reset()}>
              Change the rule
            </Button>
            <Button
              color="orange"
              loading={edit.preview.isPending}
              onClick={() => {
                setConfirmed(true);
                review({ kind: 'add', rule: { ...draft, confirm: true } });
              }}
            >
              Add it anyway
            </Button>
          </Group>
        </Stack>
      </Modal>
      {can('operator') && <Paper withBorder p="md" mt="lg" component="section" aria-labelledby="add-bypass">
        <Title order={3} size="h4" id="add-bypass" mb="sm">
          Add a custom rule
        </Title>
        <form onSubmit={submit} noValidate>
          <Grid>
            {failure && !other && risks.length === 0 && Object.keys(errors).length === 0 && (
              <Grid.Col span={12}>
                <Alert color="red" role="alert">
                  {errorMessage(failure)}
                </Alert>
              </Grid.Col>
            )}
            <Grid.Col span={{ base: 12, sm: 4 }}>
              <TextInput label="Rule name" description={NAME_HELP} required value={draft.name} onChange={(e) => setDraft({ ...draft, name: e.currentTarget.value })} error={errorFor(errors, 'name')} />
            </Grid.Col>
            <Grid.Col span={{ base: 12, sm: 4 }}>
              <Select
                label="Protocol"
                data={PROTOCOLS}
                allowDeselect={false}
                value={draft.protocol}
                onChange={(v) => v && setDraft({ ...draft, protocol: v as Protocol, ports: takesPorts(v) ? draft.ports : [] })}
                error={errorFor(errors, 'protocol')}
              />
            </Grid.Col>
            <Grid.Col span={{ base: 12, sm: 4 }}>
              <TextInput label="Comment" value={draft.comment ?? ''} onChange={(e) => setDraft({ ...draft, comment: e.currentTarget.value })} />
            </Grid.Col>
            <Grid.Col span={{ base: 12, sm: 6 }}>
              <TagsInput label="CIDRs" description="Addresses or networks; empty matches any" value={draft.cidrs ?? []} onChange={(v) => setDraft({ ...draft, cidrs: v })} error={errorFor(errors, 'cidrs')} />
            </Grid.Col>
            <Grid.Col span={{ base: 12, sm: 6 }}>
              <TagsInput
                label="Ports"
                description={portsAllowed ? 'A port or a range; empty matches any' : `Only with protocol ${PORT_PROTOCOLS.join(' or ')}`}
                disabled={!portsAllowed}
                value={draft.ports ?? []}
                onChange={(v) => setDraft({ ...draft, ports: v })}
                error={errorFor(errors, 'ports')}
              />
            </Grid.Col>
            {!other && addReview && (
              <Grid.Col span={12}>
                <ReviewAndSave change={addReview} running={edit.running} onSave={() => saveIt(adding)} saving={edit.save.isPending} />
              </Grid.Col>
            )}
            <Grid.Col span={12}>
              <Group justify="flex-end">
                <Button type="submit" variant={addReview ? 'default' : 'filled'} loading={edit.preview.isPending && !other}>
                  Add rule
                </Button>
              </Group>
            </Grid.Col>
          </Grid>
        </form>
      </Paper>}
    </>
  );
}
