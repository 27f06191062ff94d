import { EmptyState } from '../components/StateViews';
import { PageHeader } from '../components/PageHeader';

export default function BackupPage() {
  return (
    <>
      <PageHeader title="Backup and restore" />
      <EmptyState title="Coming soon" />
    </>
  );
}
