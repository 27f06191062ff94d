import { Alert, List, type AlertProps } from '@mantine/core';
import type { PolicyIssue } from '../api/endpoints';

/** One alert listing issues as "code: message"; nothing when there are none. */
function IssueAlert({ issues, ...alert }: { issues: PolicyIssue[] } & Omit<AlertProps, 'children'>) {
  if (issues.length === 0) return null;
  return (
    <Alert mb="sm" {...alert}>
      <List size="sm">
        {issues.map((i, n) => (
          <List.Item key={n}>
            <b>{i.code}</b>: {i.message}
          </List.Item>
        ))}
      </List>
    </Alert>
  );
}

/** Policy conflicts (errors) and overlaps (warnings) reported by the API. */
export function IssueList({ issues, title }: { issues: PolicyIssue[]; title?: string }) {
  if (issues.length === 0) return null;
  return (
    <>
      <IssueAlert issues={issues.filter((i) => i.severity === 'error')} color="red" title={title ?? 'Conflicts'} role="alert" />
      <IssueAlert issues={issues.filter((i) => i.severity === 'warning')} color="yellow" title="Warnings" />
    </>
  );
}

export function issuesFromDetails(details: unknown): PolicyIssue[] {
  if (details && typeof details === 'object' && Array.isArray((details as { issues?: unknown }).issues)) {
    return (details as { issues: PolicyIssue[] }).issues;
  }
  return [];
}
