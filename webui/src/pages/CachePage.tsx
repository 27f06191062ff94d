import { EmptyState } from '../components/StateViews';
import { PageHeader } from '../components/PageHeader';

export default function CachePage() {
  return (
    <>
      <PageHeader title="Cache" />
      <EmptyState title="Coming soon" />
    </>
  );
}
