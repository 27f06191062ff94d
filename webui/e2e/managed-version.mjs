// At the hub's page of one terminal: compose the version both managed-terminal suites send (QUIC
// passed end to end), review it, and hand back the review dialog once it names the section the
// version sets; the caller checks what else it wants and sends it.

export const VERSION_FORM = 'New config version';

export async function reviewQuicPass(page, terminal, comment) {
  const form = page.getByRole('form', { name: VERSION_FORM });
  await form.getByRole('textbox', { name: 'QUIC (UDP 443)' }).click();
  await page.getByRole('option', { name: /^pass/ }).click();
  await form.getByRole('button', { name: 'Set quic' }).click();
  await form.getByLabel(/^Comment/).fill(comment);
  await form.getByRole('button', { name: 'Review…' }).click();
  const dialog = page.getByRole('dialog', { name: `Send a version to ${terminal}?` });
  await dialog.getByTestId('version-consequence').getByText(/its section quic/).waitFor();
  return dialog;
}
