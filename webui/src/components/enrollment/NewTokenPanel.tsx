import { Alert, Group, Stack, Text, TextInput } from '@mantine/core';
import { useState } from 'react';
import type { EnrollmentTokenCreated } from '../../api/peer';
import { checkJoin, joinCommands, joinFileText, PIN_COMMAND, suggestedHubUrl } from '../../lib/join-file';
import { formatTime } from '../../lib/format';
import { CopyBlock } from '../CopyBlock';

/**
 * A token just made, shown this once (the hub keeps only its hash), with what the terminal needs: the join file
 * and the commands that install it, or the three values for the terminal dashboard's "Join a hub" form.
 */
export function NewTokenPanel({ created, hubPin, onDismiss }: { created: EnrollmentTokenCreated; hubPin: string | null; onDismiss: () => void }) {
  const [hubUrl, setHubUrl] = useState(() => suggestedHubUrl(window.location.origin));
  const [pin, setPin] = useState(hubPin ?? '');
  const join = { hub_url: hubUrl.trim(), hub_pin: pin.trim(), token: created.token };
  const problems = checkJoin(join);
  return (
    <Alert
      color="green"
      role="status"
      title={`Enrollment token for ${created.name} created`}
      withCloseButton
      closeButtonLabel="Dismiss the new token"
      onClose={onDismiss}
    >
      <Stack gap="sm">
        <Text size="sm">
          Copy it now: it is shown only this once. It enrolls one terminal as {created.name} ({created.prefixes.join(', ')}) until {formatTime(created.expires_at)}.
        </Text>
        <CopyBlock label="Enrollment token" value={created.token} />
        <Group align="flex-start" wrap="wrap">
          <TextInput
            label="Hub URL"
            description="This hub's dashboard address as the terminal reaches it"
            value={hubUrl}
            onChange={(e) => setHubUrl(e.currentTarget.value)}
            error={hubUrl && problems.hub_url}
            placeholder="https://hub.example.net"
            w={320}
          />
          <TextInput
            label="Hub pin"
            description={hubPin ? "This hub's HTTPS key, as the API reports it" : `On the hub: ${PIN_COMMAND}`}
            value={pin}
            onChange={(e) => setPin(e.currentTarget.value)}
            error={pin && problems.hub_pin}
            placeholder="sha256:…"
            spellCheck={false}
            styles={{ input: { fontFamily: 'monospace', fontSize: 12 } }}
            style={{ flex: 1, minWidth: 320 }}
          />
        </Group>
        {Object.keys(problems).length > 0 ? (
          <Text size="sm" c="dimmed">
            With the hub URL and pin filled in, the join file and its commands appear here.
          </Text>
        ) : (
          <>
            <CopyBlock label="Join file" value={joinFileText(join)} />
            <CopyBlock label="Commands on the terminal" value={joinCommands(join)} />
            <Text size="sm" c="dimmed">
              Or paste the three values into the terminal dashboard's System settings → Join a hub (an admin).
            </Text>
          </>
        )}
      </Stack>
    </Alert>
  );
}
