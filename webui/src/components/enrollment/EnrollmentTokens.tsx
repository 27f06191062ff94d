import { Stack, Text } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { peerEndpoints, peerKeys, type EnrollmentTokenCreated } from '../../api/peer';
import { QueryView } from '../StateViews';
import { EnrollmentTokenForm } from './EnrollmentTokenForm';
import { EnrollmentTokenTable } from './EnrollmentTokenTable';
import { NewTokenPanel } from './NewTokenPanel';

/** The hub's enrollment tokens: a terminal enrolls itself with one (no fingerprint to copy by hand). */
export function EnrollmentTokens({ canEdit, hubPin }: { canEdit: boolean; hubPin: string | null }) {
  const tokens = useQuery({ queryKey: peerKeys.enrollmentTokens, queryFn: peerEndpoints.enrollmentTokens, refetchInterval: 5000 });
  // The new token lives only here, in this page's memory: the API never gives it again.
  const [created, setCreated] = useState<EnrollmentTokenCreated | null>(null);
  return (
    <Stack>
      <Text size="sm">
        A one-time token enrolls one terminal under the name and prefixes given here: the terminal sends it with its own identity, and the hub enrolls it
        and applies it at once.
      </Text>
      {created && <NewTokenPanel key={created.id} created={created} hubPin={hubPin} onDismiss={() => setCreated(null)} />}
      <QueryView query={tokens}>{(list) => <EnrollmentTokenTable tokens={list.tokens} canEdit={canEdit} />}</QueryView>
      {canEdit && <EnrollmentTokenForm onCreated={setCreated} />}
    </Stack>
  );
}
