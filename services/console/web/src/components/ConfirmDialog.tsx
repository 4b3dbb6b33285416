// A modal question before an action that cannot be undone: the browser's <dialog> keeps the
// focus inside it and closes it on Escape.
import { useEffect, useRef, type ReactNode } from "react";

export function ConfirmDialog({ open, title, children, confirm, onConfirm, onCancel }: {
  open: boolean; title: string; children: ReactNode; confirm: string; onConfirm: () => void; onCancel: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = dialog.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  return (
    <dialog ref={dialog} className="confirm" aria-labelledby="confirm-title" onClose={onCancel}>
      <h2 id="confirm-title">{title}</h2>
      <div>{children}</div>
      <div className="actions">
        <button type="button" onClick={onCancel} autoFocus>Cancel</button>
        <button type="button" className="danger" onClick={onConfirm} data-testid="confirm-dialog-confirm">{confirm}</button>
      </div>
    </dialog>
  );
}
