import { Button, Code, CopyButton, Group, Stack, Text } from '@mantine/core';

/** A block of text to be copied as it is (a secret, a file, a command), with its copy button. */
export function CopyBlock({ label, value }: { label: string; value: string }) {
  return (
    <Stack gap={2}>
      <Group justify="space-between" wrap="nowrap">
        <Text size="sm" fw={500}>
          {label}
        </Text>
        <CopyButton value={value}>
          {({ copied, copy }) => (
            <Button variant="light" size="compact-xs" aria-label={`Copy ${label.toLowerCase()}`} onClick={copy}>
              {copied ? 'Copied' : 'Copy'}
            </Button>
          )}
        </CopyButton>
      </Group>
      <Code block aria-label={label} style={{ whiteSpace: 'pre-wrap', wordBreak: 'break-all' }}>
        {value}
      </Code>
    </Stack>
  );
}
