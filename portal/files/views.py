"""/files/: a user's home, scratch and data in the browser, as the user (portal.files).

The pages list, preview and edit through the same selectors and services as /api/v1/files/;
uploads go from the page's own script to the API's tus endpoints, downloads to its attachments.
Nothing of the user's is ever rendered as markup here: text is escaped into <pre>, images load
from the API's sandboxed content endpoint."""

import posixpath

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from portal.core.errors import InvalidInput, PortalError, PreconditionFailed
from portal.files import selectors, services
from portal.files.paths import joined, name_clean, path_clean, root_clean


def _location(data: dict, *, allow_root: bool = True) -> tuple[str, str]:
    return root_clean(data.get("root", "home")), path_clean(data.get("path", ""), allow_root=allow_root)


def _browse_url(root: str, path: str) -> str:
    return f"{reverse('files:browse')}?{urlencode({'root': root, 'path': path})}"


def _crumbs(root: str, path: str) -> list[tuple[str, str]]:
    crumbs, parts = [(root, _browse_url(root, ""))], path.split("/") if path else []
    for depth, name in enumerate(parts):
        crumbs.append((name, _browse_url(root, "/".join(parts[: depth + 1]))))
    return crumbs


@login_required
def browse_view(request: HttpRequest) -> HttpResponse:
    root, path = _location(request.GET)
    sort = selectors.sort_clean(request.GET.get("sort", "name"))
    descending = request.GET.get("order") == "desc"
    contains = request.GET.get("filter", "")[:255]
    folder = selectors.folder_list(user=request.user, root=root, path=path, sort=sort, descending=descending,
                                   contains=contains)
    try:
        usage = selectors.root_usage(user=request.user, root=root, path=path)
    except PortalError:
        usage = None
    entries = [{"entry": entry, "path": joined(path, entry.name)} for entry in folder.entries]
    return render(request, "files/browse.html", {
        "root": root, "path": path, "roots": selectors.user_roots(user=request.user),
        "crumbs": _crumbs(root, path), "entries": entries, "truncated": folder.truncated, "usage": usage,
        "sort": sort, "descending": descending,
        "filter": contains, "parent": posixpath.dirname(path) if path else None})


@login_required
def view_view(request: HttpRequest) -> HttpResponse:
    root, path = _location(request.GET, allow_root=False)
    preview = selectors.file_preview(user=request.user, root=root, path=path)
    folder = posixpath.dirname(path)
    return render(request, "files/view.html", {
        "root": root, "path": path, "name": posixpath.basename(path), "preview": preview,
        "crumbs": _crumbs(root, folder), "folder_url": _browse_url(root, folder)})


@login_required
def edit_view(request: HttpRequest) -> HttpResponse:
    """GET: the file in a form with the ETag read; POST: saved only over that version."""
    source = request.POST if request.method == "POST" else request.GET
    root, path = _location(source, allow_root=False)
    folder = posixpath.dirname(path)
    context = {"root": root, "path": path, "name": posixpath.basename(path), "crumbs": _crumbs(root, folder),
               "folder_url": _browse_url(root, folder)}
    if request.method == "POST":
        content = request.POST.get("content", "").replace("\r\n", "\n")
        etag = request.POST.get("etag") or None
        try:
            services.file_write(user=request.user, root=root, path=path, content=content, etag=etag)
        except PreconditionFailed as error:
            return render(request, "files/edit.html", {**context, "content": content, "etag": etag,
                                                       "conflict": error.message}, status=412)
        messages.success(request, f"Saved {path}.")
        return redirect(f"{reverse('files:view')}?{urlencode({'root': root, 'path': path})}")
    _, etag, data = selectors.file_text(user=request.user, root=root, path=path)
    return render(request, "files/edit.html", {**context, "content": data, "etag": etag})


@login_required
@require_POST
def action_view(request: HttpRequest) -> HttpResponse:
    """The listing's forms: new folder, rename, delete (to the trash), empty the trash."""
    root, folder = _location(request.POST)
    action = request.POST.get("action")
    try:
        if action == "mkdir":
            name = name_clean(request.POST.get("name"))
            services.folder_create(user=request.user, root=root, path=joined(folder, name))
            messages.success(request, f"Created {name}.")
        elif action == "rename":
            old, new = name_clean(request.POST.get("old"), field="old"), name_clean(request.POST.get("name"))
            services.file_move(user=request.user, root=root, path=joined(folder, old), to_root=root,
                               to_path=joined(folder, new))
            messages.success(request, f"Renamed {old} to {new}.")
        elif action == "delete":
            name = name_clean(request.POST.get("name"))
            services.file_delete(user=request.user, root=root, path=joined(folder, name))
            messages.success(request, f"Moved {name} to the trash.")
        elif action == "empty-trash":
            services.trash_empty(user=request.user)
            messages.success(request, "Emptied the trash.")
        else:
            raise InvalidInput({"action": ["Unknown action."]})
    except InvalidInput as error:
        for field, problems in error.fields.items():
            messages.error(request, f"{field}: {' '.join(str(problem) for problem in problems)}")
    except PortalError as error:
        messages.error(request, error.message)
    return redirect(_browse_url(root, folder))
