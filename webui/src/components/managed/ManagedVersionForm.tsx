import { Alert, Button, List, Stack, Textarea, TextInput, Title } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { managedEndpoints, managedKeys } from '../../api/managed';
import { parseSections, sectionDefault, withSection, type Sections } from '../../lib/managed-sections';
import { QuickSections } from './QuickSections';
import { ReviewVersionModal } from './ReviewVersionModal';

/** A new config version for one managed terminal: its sections (typed fields or JSON), reviewed, then sent. */
export function ManagedVersionForm({ terminal }: { terminal: string }) {
  const queryClient = useQueryClient();
  const [text, setText] = useState('');
  const [comment, setComment] = useState('');
  const [problems, setProblems] = useState<string[]>([]);
  const [review, setReview] = useState<Sections | null>(null);
  const post = useMutation({
    mutationFn: (sections: Sections) => managedEndpoints.postVersion(terminal, { sections, comment: comment.trim() }),
    onSuccess: async () => {
      setReview(null);
      setText('');
      setComment('');
      await Promise.all([managedKeys.versions(terminal), managedKeys.detail(terminal)].map((queryKey) => queryClient.invalidateQueries({ queryKey })));
    },
  });
  const edit = (next: string) => {
    setText(next);
    setProblems([]);
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const parsed = parseSections(text);
    if (!parsed.ok) return setProblems(parsed.errors);
    post.reset();
    setReview(parsed.sections);
  };
  return (
    <form onSubmit={submit} noValidate aria-label="New config version">
      <Stack gap="sm">
        <Title order={4} size="h5">
          A new version for {terminal}
        </Title>
        <QuickSections onSet={(name, value) => edit(withSection(text, name, value))} onDefault={(name) => edit(withSection(text, name, sectionDefault(name)))} />
        <Textarea
          label="Sections"
          description='A JSON object of the sections to set, e.g. {"quic": "pass"}'
          value={text}
          onChange={(e) => edit(e.currentTarget.value)}
          autosize
          minRows={4}
          maxRows={20}
          spellCheck={false}
          styles={{ input: { fontFamily: 'monospace', fontSize: 12 } }}
        />
        {problems.length > 0 && (
          <Alert color="red" role="alert" title="Not sent: fix these first">
            <List size="sm">
              {problems.map((p) => (
                <List.Item key={p}>{p}</List.Item>
              ))}
            </List>
          </Alert>
        )}
        <TextInput label="Comment" value={comment} onChange={(e) => setComment(e.currentTarget.value)} maxLength={1000} />
        <Button type="submit" w="fit-content">
          Review…
        </Button>
      </Stack>
      {review && (
        <ReviewVersionModal
          terminal={terminal}
          sections={review}
          comment={comment.trim()}
          error={post.error}
          pending={post.isPending}
          onSend={() => post.mutate(review)}
          onClose={() => setReview(null)}
        />
      )}
    </form>
  );
}
