import { Paper, Title } from '@mantine/core';
import type { ReactNode } from 'react';

/** A titled, bordered part of a page, labelled by its heading for screen readers. */
export function Section({ id, title, children }: { id: string; title: string; children: ReactNode }) {
  return (
    <Paper withBorder p="md" component="section" aria-labelledby={id}>
      <Title order={3} size="h4" id={id} mb="sm">
        {title}
      </Title>
      {children}
    </Paper>
  );
}
