import { Alert, List } from '@mantine/core';
import type { PolicyIssue } from '../api/endpoints';

/** Policy conflicts (errors) and overlaps (warnings) reported by the API. */
export function IssueList({ issues, title }: { issues: PolicyIssue[]; title?: string }) {
  if (issues.length === 0) return null;
  const errors = issues.filter((i) => i.severity === 'error');
  const warnings = issues.filter((i) => i.severity === 'warning');
  return (
    <>
      {errors.length > 0 && (
        <Alert color="red" title={title ?? 'Conflicts'} role="alert" mb="sm">
          <List size="sm">
            {errors.map((i, n) => (
              <List.Item key={n}>
                <b>{i.code}</b>: {i.message}
              </List.Item>
            ))}
          </List>
        </Alert>
      )}
      {warnings.length > 0 && (
        <Alert color="yellow" title="Warnings" mb="sm">
          <List size="sm">
            {warnings.map((i, n) => (
              <List.Item key={n}>
                <b>{i.code}</b>: {i.message}
              </List.Item>
            ))}
          </List>
        </Alert>
      )}
    </>
  );
}

export function issuesFromDetails(details: unknown): PolicyIssue[] {
  if (details && typeof details === 'object' && Array.isArray((details as { issues?: unknown }).issues)) {
    return (details as { issues: PolicyIssue[] }).issues;
  }
  return [];
}
