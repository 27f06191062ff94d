import { Alert, Button, Stack, Text, TextInput } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { ApiError, errorMessage, type FieldErrors } from '../../api/errors';
import { afterConfigChange } from '../../api/keys';
import { managedEndpoints, managedKeys } from '../../api/managed';
import { peerKeys } from '../../api/peer';
import { errorFor } from '../../lib/field-errors';
import { checkJoin } from '../../lib/join-file';

const FIELDS = ['hub_url', 'hub_pin', 'token'];

/** An admin joins this terminal to a hub with what the hub's operator gave: the hub's address, its pin, a token. */
export function JoinHubForm() {
  const queryClient = useQueryClient();
  const [hubUrl, setHubUrl] = useState('');
  const [hubPin, setHubPin] = useState('');
  const [token, setToken] = useState('');
  const [errors, setErrors] = useState<FieldErrors>({});
  const join = useMutation({
    mutationFn: () => managedEndpoints.join({ hub_url: hubUrl.trim(), hub_pin: hubPin.trim(), token: token.trim() }),
    onSuccess: async (status) => {
      queryClient.setQueryData(managedKeys.status, status);
      setToken('');
      setErrors({});
      await Promise.all([...afterConfigChange, peerKeys.identity].map((queryKey) => queryClient.invalidateQueries({ queryKey })));
    },
    onError: (e) => setErrors(e instanceof ApiError ? e.fieldErrors : {}),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const local: FieldErrors = { ...checkJoin({ hub_url: hubUrl, hub_pin: hubPin }) };
    if (!token.trim()) local.token = 'The enrollment token the hub’s operator made for this terminal';
    setErrors(local);
    if (!Object.keys(local).length) join.mutate();
  };
  const named = Object.keys(errors).some((k) => FIELDS.includes(k));
  return (
    <form onSubmit={submit} noValidate aria-label="Join a hub">
      <Stack gap="xs">
        <Text size="sm">
          From the hub's operator (its Terminals page → Enrollment tokens). This terminal enrolls itself at the hub over HTTPS, trusting only the pinned key, takes
          its peer path from the answer and from then on runs the config versions the hub makes for it.
        </Text>
        <TextInput label="Hub URL" placeholder="https://hub.example.net" value={hubUrl} onChange={(e) => setHubUrl(e.currentTarget.value)} error={errorFor(errors, 'hub_url')} w={360} />
        <TextInput
          label="Hub pin"
          placeholder="sha256:…"
          value={hubPin}
          onChange={(e) => setHubPin(e.currentTarget.value)}
          error={errorFor(errors, 'hub_pin')}
          spellCheck={false}
          styles={{ input: { fontFamily: 'monospace', fontSize: 12 } }}
        />
        <TextInput label="Enrollment token" value={token} onChange={(e) => setToken(e.currentTarget.value)} error={errorFor(errors, 'token')} spellCheck={false} autoComplete="off" />
        <Button type="submit" w="fit-content" loading={join.isPending}>
          Join the hub
        </Button>
        {join.error && !named && (
          <Alert color="red" role="alert" title="Not joined">
            {errorMessage(join.error)}
          </Alert>
        )}
      </Stack>
    </form>
  );
}
