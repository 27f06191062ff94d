import { Alert, Button, Group, Select, Stack, TextInput } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { ApiError, errorMessage, type FieldErrors } from '../../api/errors';
import { peerEndpoints, peerKeys, type EnrollmentTokenCreated } from '../../api/peer';
import { errorFor } from '../../lib/field-errors';
import { TerminalFields, terminalFieldErrors, words } from './TerminalFields';

const EXPIRY = [
  { value: '3600', label: '1 hour' },
  { value: '86400', label: '1 day' },
  { value: '604800', label: '7 days' },
];

/** A one-time token for a terminal's name and site prefixes: the terminal enrolls itself with it. */
export function EnrollmentTokenForm({ onCreated }: { onCreated: (t: EnrollmentTokenCreated) => void }) {
  const queryClient = useQueryClient();
  const [name, setName] = useState('');
  const [prefixes, setPrefixes] = useState('');
  const [expiry, setExpiry] = useState('86400');
  const [comment, setComment] = useState('');
  const [errors, setErrors] = useState<FieldErrors>({});
  const create = useMutation({
    mutationFn: () =>
      peerEndpoints.createEnrollmentToken({ name: name.trim(), prefixes: words(prefixes), expires_in_s: Number(expiry), comment: comment.trim() }),
    onSuccess: async (made) => {
      onCreated(made);
      setName('');
      setPrefixes('');
      setComment('');
      setErrors({});
      await queryClient.invalidateQueries({ queryKey: peerKeys.enrollmentTokens });
    },
    onError: (e) => setErrors(e instanceof ApiError ? e.fieldErrors : {}),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const local = terminalFieldErrors(name, prefixes, 'The name the terminal is enrolled under');
    setErrors(local);
    if (!Object.keys(local).length) create.mutate();
  };
  const shown = Object.keys(errors).filter((k) => ['name', 'prefixes', 'expires_in_s', 'comment'].some((f) => k === f || k.startsWith(`${f}.`)));
  return (
    <form onSubmit={submit} noValidate aria-label="Create an enrollment token">
      <Stack gap="xs">
        <Group align="flex-start" wrap="wrap">
          <TerminalFields
            nameLabel="Terminal name"
            prefixesDescription="The client prefixes of its site, one per line"
            name={name}
            prefixes={prefixes}
            onName={setName}
            onPrefixes={setPrefixes}
            errors={errors}
          />
          <Select label="Valid for" data={EXPIRY} value={expiry} onChange={(v) => v && setExpiry(v)} allowDeselect={false} error={errorFor(errors, 'expires_in_s')} w={140} />
        </Group>
        <TextInput label="Comment" value={comment} onChange={(e) => setComment(e.currentTarget.value)} error={errorFor(errors, 'comment')} maxLength={1000} />
        <Button type="submit" w="fit-content" loading={create.isPending}>
          Create token
        </Button>
        {create.error && shown.length === 0 && (
          <Alert color="red" role="alert">
            {errorMessage(create.error)}
          </Alert>
        )}
      </Stack>
    </form>
  );
}
